-- jobwheel schema v5 for SQLite: a manual trigger's payload override, kept with the
-- job until its fire is done and recorded with the run it was given to.
ALTER TABLE {p}jobs ADD COLUMN next_payload TEXT;
ALTER TABLE {p}runs ADD COLUMN payload TEXT;
