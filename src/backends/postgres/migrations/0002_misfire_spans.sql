-- jobwheel schema v2 for PostgreSQL: where a job's schedule resumes after a retry,
-- and the scheduled fires a misfire record stands for.
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS resume_after BIGINT;
ALTER TABLE {t}runs ADD COLUMN IF NOT EXISTS covered_fires BIGINT;
ALTER TABLE {t}runs ADD COLUMN IF NOT EXISTS covered_through BIGINT;
