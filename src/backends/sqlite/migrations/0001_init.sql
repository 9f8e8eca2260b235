-- jobwheel schema v1 for SQLite. `{p}` is the configured table prefix.
-- Every instant is UTC epoch milliseconds (INTEGER).
CREATE TABLE IF NOT EXISTS {p}jobs (
    id            TEXT PRIMARY KEY,
    definition    TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    enabled       INTEGER NOT NULL,
    next_fire_at  INTEGER,
    next_trigger  TEXT    NOT NULL,
    attempt       INTEGER NOT NULL,
    last_token    INTEGER NOT NULL,
    running_run   INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
-- The due scan reads only due rows: enabled, idle, with a next fire.
CREATE INDEX IF NOT EXISTS {p}jobs_due ON {p}jobs (next_fire_at, id)
    WHERE enabled = 1 AND running_run IS NULL AND next_fire_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS {p}runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id      TEXT    NOT NULL,
    fire_at     INTEGER NOT NULL,
    trigger     TEXT    NOT NULL,
    node        TEXT    NOT NULL,
    attempt     INTEGER NOT NULL,
    token       INTEGER NOT NULL,
    status      TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    error       TEXT,
    will_retry  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS {p}runs_job ON {p}runs (job_id, id);
CREATE INDEX IF NOT EXISTS {p}runs_status ON {p}runs (status, id);
CREATE INDEX IF NOT EXISTS {p}runs_started ON {p}runs (started_at);
CREATE INDEX IF NOT EXISTS {p}runs_ended ON {p}runs (ended_at) WHERE ended_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS {p}nodes (
    node_id    TEXT PRIMARY KEY,
    info       TEXT    NOT NULL,
    last_beat  INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS {p}alarms (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    event            TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL,
    next_attempt_at  INTEGER,
    claimed_by       TEXT,
    claim_until      INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS {p}alarms_claimable ON {p}alarms (status, next_attempt_at);

CREATE TABLE IF NOT EXISTS {p}locks (
    key         TEXT PRIMARY KEY,
    owner       TEXT,
    token       INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
