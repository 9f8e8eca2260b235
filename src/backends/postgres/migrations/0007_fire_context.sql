-- jobwheel schema v7 for PostgreSQL: what a fire carries to its run (the payload
-- override, and fields to come) kept as one JSON value with the job's next fire and
-- with each run; a payload override already stored becomes that value's `payload`.
ALTER TABLE {t}jobs ADD COLUMN IF NOT EXISTS next_context TEXT;
ALTER TABLE {t}runs ADD COLUMN IF NOT EXISTS context TEXT;
UPDATE {t}jobs SET next_context = '{"payload":' || next_payload || '}' WHERE next_payload IS NOT NULL;
UPDATE {t}runs SET context = '{"payload":' || payload || '}' WHERE payload IS NOT NULL;
ALTER TABLE {t}jobs DROP COLUMN IF EXISTS next_payload;
ALTER TABLE {t}runs DROP COLUMN IF EXISTS payload;
