-- jobwheel schema v12 for PostgreSQL: when a `waiting` alarm was raised for a queued
-- release's job and instant (NULL: none yet), so every node raises it once.
ALTER TABLE {t}releases ADD COLUMN IF NOT EXISTS alarmed_at BIGINT;
