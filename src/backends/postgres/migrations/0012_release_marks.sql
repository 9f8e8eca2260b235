-- jobwheel schema v12 for PostgreSQL: marks on queued releases. `alarmed_at`: when a
-- `waiting` alarm was raised for the release's job and instant (NULL: none yet), so
-- every node raises it once. `taken_at`: when a job that joins by a window took the
-- release (NULL: queued); kept a while so a later release of the window is not
-- queued again.
ALTER TABLE {t}releases ADD COLUMN IF NOT EXISTS alarmed_at BIGINT;
ALTER TABLE {t}releases ADD COLUMN IF NOT EXISTS taken_at BIGINT;
