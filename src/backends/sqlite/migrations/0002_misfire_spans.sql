-- jobwheel schema v2 for SQLite: where a job's schedule resumes after a retry, and
-- the scheduled fires a misfire record stands for.
ALTER TABLE {p}jobs ADD COLUMN resume_after INTEGER;
ALTER TABLE {p}runs ADD COLUMN covered_fires INTEGER;
ALTER TABLE {p}runs ADD COLUMN covered_through INTEGER;
