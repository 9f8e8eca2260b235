-- jobwheel schema v12 for MariaDB: a fire writes its job's row, and its run row once.
--
-- * The job's lease in its row (`lease_owner`, `lease_until`; the token is
--   `last_token`): when the scheduler's lock provider is this store's own, a claim
--   takes the lease in the row it starts, and the finish frees or keeps it in the
--   row it writes.
-- * The run in progress in its row (`run_*`, with `running_run` its id): the start
--   writes them, the finish inserts the run row from them and clears them. A run
--   row written before this version stays the running run's (`run_node` NULL) and
--   is finished as before.
ALTER TABLE {t}jobs
    ADD COLUMN IF NOT EXISTS lease_owner VARCHAR(255) NULL,
    ADD COLUMN IF NOT EXISTS lease_until BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS run_node VARCHAR(255) NULL,
    ADD COLUMN IF NOT EXISTS run_fire_at BIGINT NULL,
    ADD COLUMN IF NOT EXISTS run_trigger VARCHAR(16) NULL,
    ADD COLUMN IF NOT EXISTS run_attempt INT NULL,
    ADD COLUMN IF NOT EXISTS run_token BIGINT NULL,
    ADD COLUMN IF NOT EXISTS run_started_at BIGINT NULL,
    ADD COLUMN IF NOT EXISTS run_covered_fires BIGINT NULL,
    ADD COLUMN IF NOT EXISTS run_covered_through BIGINT NULL,
    ADD COLUMN IF NOT EXISTS run_context MEDIUMTEXT NULL,
    ADD INDEX IF NOT EXISTS {t}jobs_running (run_node, running_run);
