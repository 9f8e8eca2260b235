-- jobwheel schema v3 for MySQL 8 / MariaDB 10.6+: remote executor instances,
-- registered by heartbeat on the store's clock.
CREATE TABLE IF NOT EXISTS {t}executors (
    grp            VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    address        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    info           TEXT   NOT NULL,
    registered_at  BIGINT NOT NULL,
    last_beat      BIGINT NOT NULL,
    PRIMARY KEY (grp, address),
    KEY {t}executors_beat (last_beat)
) ENGINE = InnoDB;
