-- jobwheel schema v7 for MySQL 8 / MariaDB 10.6+: accounts and API tokens added
-- while a server runs (hashes only), by kind and name.
CREATE TABLE IF NOT EXISTS {t}credentials (
    kind        VARCHAR(16) NOT NULL,
    name        VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    body        MEDIUMTEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (kind, name)
) ENGINE = InnoDB;
