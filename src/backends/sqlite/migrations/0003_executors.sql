-- jobwheel schema v3 for SQLite: remote executor instances, registered by
-- heartbeat on the store's clock.
CREATE TABLE IF NOT EXISTS {p}executors (
    grp            TEXT    NOT NULL,
    address        TEXT    NOT NULL,
    info           TEXT    NOT NULL,
    registered_at  INTEGER NOT NULL,
    last_beat      INTEGER NOT NULL,
    PRIMARY KEY (grp, address)
);
CREATE INDEX IF NOT EXISTS {p}executors_beat ON {p}executors (last_beat);
