-- jobwheel schema v1 for PostgreSQL. `{t}` is "<schema>.<prefix>".
-- Every instant is UTC epoch milliseconds (BIGINT): no time zone, no session setting.
CREATE TABLE IF NOT EXISTS {t}jobs (
    id            TEXT PRIMARY KEY,
    definition    TEXT    NOT NULL,
    version       BIGINT  NOT NULL,
    enabled       BOOLEAN NOT NULL,
    next_fire_at  BIGINT,
    next_trigger  TEXT    NOT NULL,
    attempt       INTEGER NOT NULL,
    last_token    BIGINT  NOT NULL,
    running_run   BIGINT,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);
-- The due scan reads only due rows: enabled, idle, with a next fire.
CREATE INDEX IF NOT EXISTS {p}jobs_due ON {t}jobs (next_fire_at, id)
    WHERE enabled AND running_run IS NULL AND next_fire_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS {t}runs (
    id          BIGSERIAL PRIMARY KEY,
    job_id      TEXT    NOT NULL,
    fire_at     BIGINT  NOT NULL,
    trigger     TEXT    NOT NULL,
    node        TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    token       BIGINT  NOT NULL,
    status      TEXT    NOT NULL,
    started_at  BIGINT  NOT NULL,
    ended_at    BIGINT,
    error       TEXT,
    will_retry  BOOLEAN NOT NULL
);
CREATE INDEX IF NOT EXISTS {p}runs_job ON {t}runs (job_id, id);
CREATE INDEX IF NOT EXISTS {p}runs_status ON {t}runs (status, id);
CREATE INDEX IF NOT EXISTS {p}runs_started ON {t}runs (started_at);
CREATE INDEX IF NOT EXISTS {p}runs_ended ON {t}runs (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS {p}runs_running ON {t}runs (node) WHERE status = 'running';

CREATE TABLE IF NOT EXISTS {t}nodes (
    node_id    TEXT PRIMARY KEY,
    info       TEXT   NOT NULL,
    last_beat  BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS {t}alarms (
    id               BIGSERIAL PRIMARY KEY,
    event            TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL,
    next_attempt_at  BIGINT,
    claimed_by       TEXT,
    claim_until      BIGINT,
    last_error       TEXT,
    created_at       BIGINT  NOT NULL
);
CREATE INDEX IF NOT EXISTS {p}alarms_claimable ON {t}alarms (status, next_attempt_at);

CREATE TABLE IF NOT EXISTS {t}locks (
    key         TEXT PRIMARY KEY,
    owner       TEXT,
    token       BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
);
