-- jobwheel schema v11 for PostgreSQL: releases queued per job (a child job released
-- by the end of its parent's fire), keyed by (job, upstream job, upstream fire).
CREATE TABLE IF NOT EXISTS {t}releases (
    job_id       TEXT COLLATE "C" NOT NULL,
    source       TEXT COLLATE "C" NOT NULL,
    fire_at      BIGINT NOT NULL,
    upstream     TEXT   NOT NULL,
    released_at  BIGINT NOT NULL,
    PRIMARY KEY (job_id, source, fire_at)
);
