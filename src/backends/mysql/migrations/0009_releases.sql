-- jobwheel schema v9 for MySQL 8 / MariaDB 10.6+: releases queued per job (a child
-- job released by the end of its parent's fire), keyed by (job, upstream job,
-- upstream fire).
CREATE TABLE IF NOT EXISTS {t}releases (
    job_id       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    source       VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fire_at      BIGINT NOT NULL,
    upstream     TEXT CHARACTER SET utf8mb4 NOT NULL,
    released_at  BIGINT NOT NULL,
    PRIMARY KEY (job_id, source, fire_at)
) ENGINE = InnoDB;
