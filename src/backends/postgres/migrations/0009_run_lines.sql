-- jobwheel schema v9 for PostgreSQL: local runs' log lines, one row per line, by
-- run and offset (deleted with their run).
CREATE TABLE IF NOT EXISTS {t}run_lines (
    run_id  BIGINT NOT NULL,
    seq     BIGINT NOT NULL,
    line    TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
