-- jobwheel schema v14 for PostgreSQL: a fire writes its job's row, and its run row
-- once.
--
-- * The job's lease in its row (`lease_owner`, `lease_until`; the token is
--   `last_token`): when the scheduler's lock provider is this store's own, a claim
--   takes the lease in the row it starts, and the finish frees or keeps it in the
--   row it writes.
-- * The run in progress in its row (`run_*`, with `running_run` its id): the start
--   writes them, the finish inserts the run row from them and clears them. A run
--   row written before this version stays the running run's (`run_node` NULL) and
--   is finished as before.
-- * Room on each page (fillfactor 80), so an update that changes no indexed column
--   (a renewal, a release, a grant ahead of a fire) stays on its page (HOT).
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS lease_owner TEXT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS lease_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_node TEXT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_fire_at BIGINT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_trigger TEXT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_attempt INTEGER;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_token BIGINT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_started_at BIGINT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_covered_fires BIGINT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_covered_through BIGINT;
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS run_context TEXT;
ALTER TABLE {t}jobs SET (fillfactor = 80);
-- Running runs kept in job rows, by node (a node's own, a dead node's).
CREATE INDEX IF NOT EXISTS {p}jobs_running ON {t}jobs (run_node, running_run) WHERE run_node IS NOT NULL;
