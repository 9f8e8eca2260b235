-- jobwheel schema v8 for SQLite: local runs' log lines, one row per line, by run
-- and offset (deleted with their run).
CREATE TABLE IF NOT EXISTS {p}run_lines (
    run_id  INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    line    TEXT    NOT NULL,
    PRIMARY KEY (run_id, seq)
);
