-- jobwheel schema v13 for PostgreSQL: the run log and its lines partitioned by day.
--
-- A run id carries the UTC day it started on: id = day * 2^33 + (a sequence's next
-- value mod 2^33), where day counts days since 1970-01-01 (ids stay below 2^53, so
-- JavaScript reads them exactly; unique while a day starts fewer than 2^33 runs).
-- Both tables are partitioned by range of the run id, one partition per day
-- (`<prefix>runs_dYYYYMMDD`, `<prefix>run_lines_dYYYYMMDD`), so a lookup by id
-- touches one partition and retention drops a whole day with `DROP TABLE`.
--
-- The tables as they were become each one partition (`<prefix>runs_legacy`,
-- `<prefix>run_lines_legacy`) holding every id below today's first: no row is
-- copied. Attaching them checks their ids in one read of each table, under the
-- migration's lock on the run log (starts and finishes wait for it). Their
-- indexes are matched to the new tables' by definition, so none is rebuilt.
CREATE SEQUENCE IF NOT EXISTS {t}run_ids;

ALTER TABLE {t}runs RENAME TO {p}runs_legacy;
ALTER INDEX {t}runs_pkey RENAME TO {p}runs_legacy_pkey;
ALTER INDEX IF EXISTS {t}runs_job RENAME TO {p}runs_legacy_job;
ALTER INDEX IF EXISTS {t}runs_running RENAME TO {p}runs_legacy_running;
ALTER INDEX IF EXISTS {t}runs_unsucceeded RENAME TO {p}runs_legacy_unsucceeded;
ALTER INDEX IF EXISTS {t}runs_started_brin RENAME TO {p}runs_legacy_started_brin;
ALTER INDEX IF EXISTS {t}runs_ended_brin RENAME TO {p}runs_legacy_ended_brin;
ALTER TABLE {t}run_lines RENAME TO {p}run_lines_legacy;
ALTER INDEX {t}run_lines_pkey RENAME TO {p}run_lines_legacy_pkey;

CREATE TABLE {t}runs (LIKE {t}runs_legacy INCLUDING DEFAULTS) PARTITION BY RANGE (id);
-- Ids are written by the insert (from the same clock reading as `started_at`).
ALTER TABLE {t}runs ALTER COLUMN id DROP DEFAULT;
ALTER TABLE {t}runs ADD CONSTRAINT {p}runs_pkey PRIMARY KEY (id);
CREATE INDEX {p}runs_job ON {t}runs (job_id, id);
CREATE INDEX {p}runs_running ON {t}runs (node) WHERE status = 'running';
CREATE INDEX {p}runs_unsucceeded ON {t}runs (id) WHERE status NOT IN ('running', 'succeeded');
CREATE INDEX {p}runs_started_brin ON {t}runs USING brin (started_at);
CREATE INDEX {p}runs_ended_brin ON {t}runs USING brin (ended_at);

CREATE TABLE {t}run_lines (LIKE {t}run_lines_legacy) PARTITION BY RANGE (run_id);
ALTER TABLE {t}run_lines ADD CONSTRAINT {p}run_lines_pkey PRIMARY KEY (run_id, seq);

DO $$
DECLARE
    step CONSTANT BIGINT := 8589934592;
    today BIGINT := floor(extract(epoch from clock_timestamp()) / 86400)::BIGINT;
    d BIGINT;
    tag TEXT;
BEGIN
    EXECUTE format('ALTER TABLE {t}runs ATTACH PARTITION {t}runs_legacy FOR VALUES FROM (MINVALUE) TO (%s)', today * step);
    EXECUTE format('ALTER TABLE {t}run_lines ATTACH PARTITION {t}run_lines_legacy FOR VALUES FROM (MINVALUE) TO (%s)', today * step);
    FOR d IN today .. today + 7 LOOP
        tag := to_char(timestamp '1970-01-01' + d * interval '1 day', 'YYYYMMDD');
        EXECUTE format('CREATE TABLE IF NOT EXISTS {t}runs_d%s PARTITION OF {t}runs FOR VALUES FROM (%s) TO (%s)',
                       tag, d * step, (d + 1) * step);
        EXECUTE format('CREATE TABLE IF NOT EXISTS {t}run_lines_d%s PARTITION OF {t}run_lines FOR VALUES FROM (%s) TO (%s)',
                       tag, d * step, (d + 1) * step);
    END LOOP;
END $$;
