-- jobwheel schema v10 for SQLite: marks on queued releases. `alarmed_at`: when a
-- `waiting` alarm was raised for the release's job and instant (NULL: none yet), so
-- every node raises it once. `taken_at`: when a job that joins by a window took the
-- release (NULL: queued); kept a while so a later release of the window is not
-- queued again.
ALTER TABLE {p}releases ADD COLUMN alarmed_at INTEGER;
ALTER TABLE {p}releases ADD COLUMN taken_at INTEGER;
