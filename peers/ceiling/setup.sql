-- The SQL-only ceiling of a batched fire cycle, no scheduler code, on the workload
-- the harness drains: 20,000 one-shot fires due now. A fire row holds what a
-- scheduler's job row holds (an id, a definition of about 200 bytes, the due
-- instant, a lease); the run log has a primary key and an index by fire, as a
-- scheduler's run log needs.
DROP SCHEMA IF EXISTS peers_ceiling CASCADE;
CREATE SCHEMA peers_ceiling;
CREATE TABLE peers_ceiling.fires (
    id          TEXT COLLATE "C" PRIMARY KEY,
    definition  TEXT NOT NULL,
    due_at      BIGINT,
    lease_owner TEXT,
    lease_token BIGINT NOT NULL DEFAULT 0,
    lease_until BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX fires_due ON peers_ceiling.fires (due_at, id) WHERE due_at IS NOT NULL;
CREATE TABLE peers_ceiling.runs (
    id          BIGSERIAL PRIMARY KEY,
    fire_id     TEXT COLLATE "C" NOT NULL,
    fire_at     BIGINT NOT NULL,
    node        TEXT NOT NULL,
    token       BIGINT NOT NULL,
    status      TEXT NOT NULL,
    started_at  BIGINT NOT NULL,
    ended_at    BIGINT
);
CREATE INDEX runs_fire ON peers_ceiling.runs (fire_id, id);
INSERT INTO peers_ceiling.fires (id, definition, due_at)
SELECT 'j' || g, repeat('x', 200), 1 FROM generate_series(1, :fires) g;
VACUUM ANALYZE peers_ceiling.fires;
