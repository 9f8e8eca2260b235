-- jobwheel schema v11 for SQLite: a fire writes its job's row, and its run row once.
--
-- * The job's lease in its row (`lease_owner`, `lease_until`; the token is
--   `last_token`): when the scheduler's lock provider is this store's own, a claim
--   takes the lease in the row it starts, and the finish frees or keeps it in the
--   row it writes.
-- * The run in progress in its row (`run_*`, with `running_run` its id): the start
--   writes them, the finish inserts the run row from them and clears them. A run
--   row written before this version stays the running run's (`run_node` NULL) and
--   is finished as before.
-- * Run ids from a counter (`run_ids`), since a run's row is written at its end:
--   past every id the run table ever held.
ALTER TABLE {p}jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE {p}jobs ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
ALTER TABLE {p}jobs ADD COLUMN run_node TEXT;
ALTER TABLE {p}jobs ADD COLUMN run_fire_at INTEGER;
ALTER TABLE {p}jobs ADD COLUMN run_trigger TEXT;
ALTER TABLE {p}jobs ADD COLUMN run_attempt INTEGER;
ALTER TABLE {p}jobs ADD COLUMN run_token INTEGER;
ALTER TABLE {p}jobs ADD COLUMN run_started_at INTEGER;
ALTER TABLE {p}jobs ADD COLUMN run_covered_fires INTEGER;
ALTER TABLE {p}jobs ADD COLUMN run_covered_through INTEGER;
ALTER TABLE {p}jobs ADD COLUMN run_context TEXT;
CREATE INDEX IF NOT EXISTS {p}jobs_running ON {p}jobs (run_node, running_run) WHERE run_node IS NOT NULL;
CREATE TABLE IF NOT EXISTS {p}run_ids (n INTEGER NOT NULL);
INSERT INTO {p}run_ids (n)
SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = '{p}runs'), 0),
           COALESCE((SELECT MAX(id) FROM {p}runs), 0));
