-- jobwheel schema v10 for PostgreSQL: fewer index entries per run. A run row is
-- written twice, inserted at its start and rewritten at its finish (a new row
-- version, with an entry in every B-tree index), so each B-tree index on the run
-- table costs two entries per run. Kept: the primary key, runs by job, and running
-- runs by node (only a running version has an entry). Replaced:
-- * runs by status: a partial index of the runs that ended other than succeeded
--   (failed, timed out, lost, cancelled, misfired, given back), which a run that
--   succeeds never enters; runs that succeeded are found through the primary key
--   (most runs are), running ones through the running index;
-- * start and end instants: BRIN indexes, which keep one summary per range of table
--   pages instead of an entry per row version (run rows are written in time order).
CREATE INDEX IF NOT EXISTS {p}runs_unsucceeded ON {t}runs (id)
    WHERE status NOT IN ('running', 'succeeded');
CREATE INDEX IF NOT EXISTS {p}runs_started_brin ON {t}runs USING brin (started_at);
CREATE INDEX IF NOT EXISTS {p}runs_ended_brin ON {t}runs USING brin (ended_at);
DROP INDEX IF EXISTS {t}runs_status;
DROP INDEX IF EXISTS {t}runs_started;
DROP INDEX IF EXISTS {t}runs_ended;
