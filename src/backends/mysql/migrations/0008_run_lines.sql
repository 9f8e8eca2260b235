-- jobwheel schema v8 for MySQL 8 / MariaDB 10.6+: local runs' log lines, one row
-- per line, by run and offset (deleted with their run).
CREATE TABLE IF NOT EXISTS {t}run_lines (
    run_id  BIGINT NOT NULL,
    seq     BIGINT NOT NULL,
    line    TEXT CHARACTER SET utf8mb4 NOT NULL,
    PRIMARY KEY (run_id, seq)
) ENGINE = InnoDB;
