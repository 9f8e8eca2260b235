-- jobwheel schema v4 for SQLite: the audit log of changes made through the admin
-- API and the command line.
CREATE TABLE IF NOT EXISTS {p}audit (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    at           INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    target       TEXT    NOT NULL,
    before_json  TEXT,
    after_json   TEXT
);
CREATE INDEX IF NOT EXISTS {p}audit_at ON {p}audit (at);
