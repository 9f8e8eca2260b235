-- jobwheel schema v11 for MariaDB 10.6+: the run log and its lines partitioned by day.
--
-- A run id carries the UTC day it started on: id = day * 2^33 + (the next value of
-- the sequence `<prefix>run_ids` mod 2^33), where day counts days since 1970-01-01
-- (ids stay below 2^53, so JavaScript reads them exactly; unique while a day starts
-- fewer than 2^33 runs). Both tables are range-partitioned by run id, one partition
-- per day (`dYYYYMMDD`) and `pmax` after the last, so a lookup by id reads one
-- partition and retention drops a whole day (`DROP PARTITION`).
--
-- The tables as they were become each the partition `legacy` (every id below
-- today's first) by `EXCHANGE PARTITION`: no row is copied; the exchange checks
-- their ids in one read of each table, while writes to it wait.
CREATE SEQUENCE IF NOT EXISTS {t}run_ids;

CREATE TABLE {t}runs_parted LIKE {t}runs;
CREATE TABLE {t}run_lines_parted LIKE {t}run_lines;

SET @jw_step = 8589934592, @jw_today = UNIX_TIMESTAMP() DIV 86400;
WITH RECURSIVE d(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM d WHERE n < 7)
SELECT GROUP_CONCAT(
           CONCAT('PARTITION d', DATE_FORMAT(DATE('1970-01-01') + INTERVAL (@jw_today + n) DAY, '%Y%m%d'),
                  ' VALUES LESS THAN (', (@jw_today + n + 1) * @jw_step, ')')
           ORDER BY n SEPARATOR ', ')
INTO @jw_days FROM d;
SET @jw_parts = CONCAT('(PARTITION legacy VALUES LESS THAN (', @jw_today * @jw_step, '), ', @jw_days,
                       ', PARTITION pmax VALUES LESS THAN MAXVALUE)');
EXECUTE IMMEDIATE CONCAT('ALTER TABLE {t}runs_parted PARTITION BY RANGE (id) ', @jw_parts);
EXECUTE IMMEDIATE CONCAT('ALTER TABLE {t}run_lines_parted PARTITION BY RANGE (run_id) ', @jw_parts);

ALTER TABLE {t}runs_parted EXCHANGE PARTITION legacy WITH TABLE {t}runs;
ALTER TABLE {t}run_lines_parted EXCHANGE PARTITION legacy WITH TABLE {t}run_lines;
RENAME TABLE {t}runs TO {t}runs_emptied, {t}runs_parted TO {t}runs,
             {t}run_lines TO {t}run_lines_emptied, {t}run_lines_parted TO {t}run_lines;
DROP TABLE {t}runs_emptied, {t}run_lines_emptied;
