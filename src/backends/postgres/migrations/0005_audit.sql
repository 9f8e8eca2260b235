-- jobwheel schema v5 for PostgreSQL: the audit log of changes made through the
-- admin API and the command line.
CREATE TABLE IF NOT EXISTS {t}audit (
    id           BIGSERIAL PRIMARY KEY,
    at           BIGINT NOT NULL,
    actor        TEXT COLLATE "C" NOT NULL,
    action       TEXT   NOT NULL,
    target       TEXT COLLATE "C" NOT NULL,
    before_json  TEXT,
    after_json   TEXT
);
CREATE INDEX IF NOT EXISTS {p}audit_at ON {t}audit (at);
