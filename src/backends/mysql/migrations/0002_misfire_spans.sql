-- jobwheel schema v2 for MySQL 8 / MariaDB 10.6+: where a job's schedule resumes
-- after a retry, and the scheduled fires a misfire record stands for.
ALTER TABLE {t}jobs ADD COLUMN resume_after BIGINT NULL;
ALTER TABLE {t}runs ADD COLUMN covered_fires BIGINT NULL, ADD COLUMN covered_through BIGINT NULL;
