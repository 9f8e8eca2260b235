-- jobwheel schema v6 for MySQL 8 / MariaDB 10.6+: what a fire carries to its run
-- (the payload override, and fields to come) kept as one JSON value with the job's
-- next fire and with each run; a payload override already stored becomes that
-- value's `payload`.
ALTER TABLE {t}jobs ADD COLUMN next_context MEDIUMTEXT NULL;
ALTER TABLE {t}runs ADD COLUMN context MEDIUMTEXT NULL;
UPDATE {t}jobs SET next_context = CONCAT('{"payload":', next_payload, '}') WHERE next_payload IS NOT NULL;
UPDATE {t}runs SET context = CONCAT('{"payload":', payload, '}') WHERE payload IS NOT NULL;
ALTER TABLE {t}jobs DROP COLUMN next_payload;
ALTER TABLE {t}runs DROP COLUMN payload;
