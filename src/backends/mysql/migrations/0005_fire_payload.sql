-- jobwheel schema v5 for MySQL 8 / MariaDB 10.6+: a manual trigger's payload
-- override, kept with the job until its fire is done and recorded with the run it
-- was given to.
ALTER TABLE {t}jobs ADD COLUMN next_payload MEDIUMTEXT NULL;
ALTER TABLE {t}runs ADD COLUMN payload MEDIUMTEXT NULL;
