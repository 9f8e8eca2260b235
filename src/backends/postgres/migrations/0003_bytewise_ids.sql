-- jobwheel schema v3 for PostgreSQL: job ids compare bytewise, as on every backend
-- (the database's locale would otherwise decide the due order and list pages).
ALTER TABLE {t}jobs ALTER COLUMN id TYPE TEXT COLLATE "C";
ALTER TABLE {t}runs ALTER COLUMN job_id TYPE TEXT COLLATE "C";
ALTER TABLE {t}locks ALTER COLUMN key TYPE TEXT COLLATE "C";
