-- jobwheel schema v10 for MySQL 8 / MariaDB 10.6+: marks on queued releases.
-- `alarmed_at`: when a `waiting` alarm was raised for the release's job and instant
-- (NULL: none yet), so every node raises it once. `taken_at`: when a job that joins
-- by a window took the release (NULL: queued); kept a while so a later release of
-- the window is not queued again.
ALTER TABLE {t}releases ADD COLUMN alarmed_at BIGINT NULL;
ALTER TABLE {t}releases ADD COLUMN taken_at BIGINT NULL;
