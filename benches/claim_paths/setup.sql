-- Schema of the statement-level claim-path comparison: the backend's jobs, runs and
-- locks tables (with their indexes) plus lease columns in the job row, and 20,000
-- one-shots due now.
DROP SCHEMA IF EXISTS jobwheel_claim_paths CASCADE; CREATE SCHEMA jobwheel_claim_paths;
CREATE TABLE jobwheel_claim_paths.jobs (id TEXT COLLATE "C" PRIMARY KEY, definition TEXT NOT NULL, version BIGINT NOT NULL, enabled BOOLEAN NOT NULL,
 next_fire_at BIGINT, next_trigger TEXT NOT NULL, attempt INTEGER NOT NULL, last_token BIGINT NOT NULL, running_run BIGINT,
 created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, resume_after BIGINT, lease_owner TEXT, lease_token BIGINT NOT NULL DEFAULT 0, lease_until BIGINT);
CREATE INDEX jobs_due ON jobwheel_claim_paths.jobs (next_fire_at, id) WHERE enabled AND running_run IS NULL AND next_fire_at IS NOT NULL;
CREATE TABLE jobwheel_claim_paths.runs (id BIGSERIAL PRIMARY KEY, job_id TEXT COLLATE "C" NOT NULL, fire_at BIGINT NOT NULL, trigger TEXT NOT NULL, node TEXT NOT NULL,
 attempt INTEGER NOT NULL, token BIGINT NOT NULL, status TEXT NOT NULL, started_at BIGINT NOT NULL, ended_at BIGINT, error TEXT, will_retry BOOLEAN NOT NULL,
 covered_fires BIGINT, covered_through BIGINT);
CREATE INDEX runs_job ON jobwheel_claim_paths.runs (job_id, id);
CREATE INDEX runs_status ON jobwheel_claim_paths.runs (status, id);
CREATE INDEX runs_started ON jobwheel_claim_paths.runs (started_at);
CREATE INDEX runs_ended ON jobwheel_claim_paths.runs (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX runs_running ON jobwheel_claim_paths.runs (node) WHERE status = 'running';
CREATE TABLE jobwheel_claim_paths.locks (key TEXT COLLATE "C" PRIMARY KEY, owner TEXT, token BIGINT NOT NULL, expires_at BIGINT NOT NULL);
INSERT INTO jobwheel_claim_paths.jobs (id, definition, version, enabled, next_fire_at, next_trigger, attempt, last_token, created_at, updated_at)
SELECT 'job-' || lpad(g::text, 6, '0'), repeat('x', 220), 1, true, 1000, 'schedule', 0, 0, 0, 0 FROM generate_series(1, 20000) g;
VACUUM ANALYZE jobwheel_claim_paths.jobs;
