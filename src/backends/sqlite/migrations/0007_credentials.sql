-- jobwheel schema v7 for SQLite: accounts and API tokens added while a server runs
-- (hashes only), by kind and name.
CREATE TABLE IF NOT EXISTS {p}credentials (
    kind        TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    body        TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
);
