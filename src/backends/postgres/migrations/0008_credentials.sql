-- jobwheel schema v8 for PostgreSQL: accounts and API tokens added while a server
-- runs (hashes only), by kind and name.
CREATE TABLE IF NOT EXISTS {t}credentials (
    kind        TEXT NOT NULL,
    name        TEXT COLLATE "C" NOT NULL,
    body        TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (kind, name)
);
