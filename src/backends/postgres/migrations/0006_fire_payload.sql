-- jobwheel schema v6 for PostgreSQL: a manual trigger's payload override, kept with
-- the job until its fire is done and recorded with the run it was given to.
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS next_payload TEXT;
ALTER TABLE {t}runs ADD COLUMN IF NOT EXISTS payload TEXT;
