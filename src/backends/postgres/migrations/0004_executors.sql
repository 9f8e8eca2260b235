-- jobwheel schema v4 for PostgreSQL: remote executor instances, registered by
-- heartbeat on the store's clock.
CREATE TABLE IF NOT EXISTS {t}executors (
    grp            TEXT COLLATE "C" NOT NULL,
    address        TEXT COLLATE "C" NOT NULL,
    info           TEXT   NOT NULL,
    registered_at  BIGINT NOT NULL,
    last_beat      BIGINT NOT NULL,
    PRIMARY KEY (grp, address)
);
CREATE INDEX IF NOT EXISTS {p}executors_beat ON {t}executors (last_beat);
