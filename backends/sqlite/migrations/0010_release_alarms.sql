-- jobwheel schema v10 for SQLite: when a `waiting` alarm was raised for a queued
-- release's job and instant (NULL: none yet), so every node raises it once.
ALTER TABLE {p}releases ADD COLUMN alarmed_at INTEGER;
