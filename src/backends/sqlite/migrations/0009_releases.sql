-- jobwheel schema v9 for SQLite: releases queued per job (a child job released by
-- the end of its parent's fire), keyed by (job, upstream job, upstream fire).
-- `upstream` is the releasing run (JSON: job, fire_at, run, status, depth).
CREATE TABLE IF NOT EXISTS {p}releases (
    job_id       TEXT    NOT NULL,
    source       TEXT    NOT NULL,
    fire_at      INTEGER NOT NULL,
    upstream     TEXT    NOT NULL,
    released_at  INTEGER NOT NULL,
    PRIMARY KEY (job_id, source, fire_at)
);
