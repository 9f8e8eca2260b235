-- jobwheel schema v1 for MySQL 8 / MariaDB 10.6+. `{t}` is the table prefix.
-- Instants are UTC epoch milliseconds (BIGINT): never TIMESTAMP (2038, session zones).
-- Ids compare case-sensitively (utf8mb4_bin).
CREATE TABLE IF NOT EXISTS {t}jobs (
    id            VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    definition    MEDIUMTEXT NOT NULL,
    version       BIGINT     NOT NULL,
    enabled       BOOLEAN    NOT NULL,
    next_fire_at  BIGINT     NULL,
    next_trigger  VARCHAR(16) NOT NULL,
    attempt       INT        NOT NULL,
    last_token    BIGINT     NOT NULL,
    running_run   BIGINT     NULL,
    created_at    BIGINT     NOT NULL,
    updated_at    BIGINT     NOT NULL,
    KEY {t}jobs_due (enabled, running_run, next_fire_at, id)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS {t}runs (
    id          BIGINT AUTO_INCREMENT PRIMARY KEY,
    job_id      VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    fire_at     BIGINT      NOT NULL,
    `trigger`   VARCHAR(16) NOT NULL,
    node        VARCHAR(255) NOT NULL,
    attempt     INT         NOT NULL,
    token       BIGINT      NOT NULL,
    status      VARCHAR(16) NOT NULL,
    started_at  BIGINT      NOT NULL,
    ended_at    BIGINT      NULL,
    error       TEXT        NULL,
    will_retry  BOOLEAN     NOT NULL,
    KEY {t}runs_job (job_id, id),
    KEY {t}runs_status (status, id),
    KEY {t}runs_started (started_at),
    KEY {t}runs_ended (ended_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS {t}nodes (
    node_id    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    info       TEXT   NOT NULL,
    last_beat  BIGINT NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS {t}alarms (
    id               BIGINT AUTO_INCREMENT PRIMARY KEY,
    event            MEDIUMTEXT  NOT NULL,
    status           VARCHAR(16) NOT NULL,
    attempts         INT         NOT NULL,
    next_attempt_at  BIGINT      NULL,
    claimed_by       VARCHAR(255) NULL,
    claim_until      BIGINT      NULL,
    last_error       TEXT        NULL,
    created_at       BIGINT      NOT NULL,
    KEY {t}alarms_claimable (status, next_attempt_at)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS {t}locks (
    lock_key    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
    owner       VARCHAR(255) NULL,
    token       BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL
) ENGINE = InnoDB;
