-- jobwheel schema v6 for SQLite: what a fire carries to its run (the payload
-- override, and fields to come) kept as one JSON value with the job's next fire and
-- with each run; a payload override already stored becomes that value's `payload`.
ALTER TABLE {p}jobs ADD COLUMN next_context TEXT;
ALTER TABLE {p}runs ADD COLUMN context TEXT;
UPDATE {p}jobs SET next_context = '{"payload":' || next_payload || '}' WHERE next_payload IS NOT NULL;
UPDATE {p}runs SET context = '{"payload":' || payload || '}' WHERE payload IS NOT NULL;
ALTER TABLE {p}jobs DROP COLUMN next_payload;
ALTER TABLE {p}runs DROP COLUMN payload;
