-- jobwheel schema v15 for PostgreSQL: a remote run's record names the executor
-- instance that ran it (`executor`, written with the run's end; NULL for a local
-- run). Added to the partitioned run log, so every partition has it.
ALTER TABLE {t}runs ADD COLUMN IF NOT EXISTS executor TEXT;
