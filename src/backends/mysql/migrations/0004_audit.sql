-- jobwheel schema v4 for MySQL 8 / MariaDB 10.6+: the audit log of changes made
-- through the admin API and the command line.
CREATE TABLE IF NOT EXISTS {t}audit (
    id           BIGINT AUTO_INCREMENT PRIMARY KEY,
    at           BIGINT NOT NULL,
    actor        VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    action       VARCHAR(64)  NOT NULL,
    target       VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    before_json  MEDIUMTEXT NULL,
    after_json   MEDIUMTEXT NULL,
    KEY {t}audit_at (at)
) ENGINE = InnoDB;
