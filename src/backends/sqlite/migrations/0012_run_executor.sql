-- jobwheel schema v12 for SQLite: a remote run's record names the executor
-- instance that ran it (`executor`, written with the run's end; NULL for a local
-- run).
ALTER TABLE {p}runs ADD COLUMN executor TEXT;
