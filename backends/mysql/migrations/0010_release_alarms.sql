-- jobwheel schema v10 for MySQL 8 / MariaDB 10.6+: when a `waiting` alarm was raised
-- for a queued release's job and instant (NULL: none yet), so every node raises it
-- once.
ALTER TABLE {t}releases ADD COLUMN alarmed_at BIGINT NULL;
