-- Switchyard schema, version 1, PostgreSQL dialect. Same tables and columns
-- as ../0001_init.sql; types differ where SQLite's are not PostgreSQL's:
-- epoch-millisecond instants are BIGINT (INTEGER is 32-bit here), 0/1 flags
-- are BOOLEAN (the rows use Go bool), DATETIME is TIMESTAMPTZ, BLOB is
-- BYTEA, and the case-insensitive combo name uses an index on lower(name).

CREATE TABLE custom_providers (
    id          TEXT PRIMARY KEY,
    wire_format TEXT NOT NULL CHECK (wire_format IN ('openai', 'anthropic')),
    auth_class  TEXT NOT NULL CHECK (auth_class IN ('apikey', 'local')),
    created_at  TIMESTAMPTZ NOT NULL
);

CREATE TABLE connections (
    id                    TEXT PRIMARY KEY,
    provider              TEXT NOT NULL,
    auth_class            TEXT NOT NULL,
    name                  TEXT NOT NULL,
    enabled               BOOLEAN NOT NULL DEFAULT TRUE,
    priority              INTEGER NOT NULL DEFAULT 0,
    base_url              TEXT NOT NULL DEFAULT '',
    default_model         TEXT NOT NULL DEFAULT '',
    credentials_enc       BYTEA,
    secret_preview        TEXT NOT NULL DEFAULT '',
    max_concurrent        INTEGER,
    rate_limit_protection BOOLEAN,
    rate_limit_overrides  TEXT NOT NULL DEFAULT '{}',
    proxy_url_enc         BYTEA,
    egress_group          TEXT NOT NULL DEFAULT '',
    disable_cooling       BOOLEAN NOT NULL DEFAULT FALSE,
    quota_reserve_percent INTEGER NOT NULL DEFAULT 0,
    tier                  TEXT NOT NULL DEFAULT 'standard',
    rate_limited_until    BIGINT,
    backoff_level         INTEGER NOT NULL DEFAULT 0,
    terminal_status       TEXT,
    terminal_at           BIGINT,
    last_error            TEXT NOT NULL DEFAULT '',
    last_error_reason     TEXT NOT NULL DEFAULT '',
    last_error_status     INTEGER NOT NULL DEFAULT 0,
    error_code            TEXT NOT NULL DEFAULT '',
    last_error_at         BIGINT,
    auth_fail_count       INTEGER NOT NULL DEFAULT 0,
    reject_streak         INTEGER NOT NULL DEFAULT 0,
    last_reject_at        BIGINT,
    test_status           TEXT NOT NULL DEFAULT '',
    last_test             TEXT,
    last_used_at          BIGINT,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL,
    UNIQUE (provider, name)
);
CREATE INDEX connections_provider ON connections(provider, priority);

CREATE TABLE combos (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    strategy    TEXT NOT NULL DEFAULT 'priority',
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    hidden      BOOLEAN NOT NULL DEFAULT FALSE,
    sort_order  INTEGER NOT NULL DEFAULT 0,
    targets     TEXT NOT NULL DEFAULT '[]',
    config      TEXT NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX combos_name ON combos(lower(name));

CREATE TABLE api_keys (
    id                      TEXT PRIMARY KEY,
    name                    TEXT NOT NULL,
    prefix                  TEXT NOT NULL,
    key_hash                TEXT NOT NULL UNIQUE,
    enabled                 BOOLEAN NOT NULL DEFAULT TRUE,
    scopes                  TEXT NOT NULL DEFAULT '["inference"]',
    allowed_models          TEXT,
    allowed_combos          TEXT,
    allowed_connections     TEXT,
    requests_per_minute     INTEGER,
    max_concurrent_requests INTEGER,
    expires_at              TIMESTAMPTZ,
    created_at              TIMESTAMPTZ NOT NULL,
    last_used_at            TIMESTAMPTZ,
    revoked_at              TIMESTAMPTZ
);

CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    revision   BIGINT NOT NULL DEFAULT 1,
    updated_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE admin_credentials (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    password_hash TEXT NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE admin_sessions (
    id_hash      TEXT PRIMARY KEY,
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    client_ip    TEXT NOT NULL DEFAULT '',
    user_agent   TEXT NOT NULL DEFAULT ''
);

CREATE TABLE domain_circuit_breakers (
    name                TEXT PRIMARY KEY,
    profile             TEXT NOT NULL,
    state               TEXT NOT NULL,
    failure_count       INTEGER NOT NULL DEFAULT 0,
    open_cycle_count    INTEGER NOT NULL DEFAULT 0,
    opened_at           BIGINT,
    last_failure_at     BIGINT,
    last_failure_reason TEXT NOT NULL DEFAULT '',
    generation          BIGINT NOT NULL DEFAULT 0,
    updated_at          BIGINT NOT NULL
);

CREATE TABLE model_lockouts (
    provider         TEXT NOT NULL,
    connection_id    TEXT NOT NULL,
    key_shape        TEXT NOT NULL CHECK (key_shape IN ('family', 'base', 'exact')),
    lock_key         TEXT NOT NULL,
    model            TEXT NOT NULL DEFAULT '',
    reason           TEXT NOT NULL DEFAULT '',
    last_status      INTEGER NOT NULL DEFAULT 0,
    failure_count    INTEGER NOT NULL DEFAULT 0,
    locked_at        BIGINT NOT NULL,
    until            BIGINT NOT NULL,
    last_failure_at  BIGINT NOT NULL,
    last_cooldown_ms BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (provider, connection_id, key_shape, lock_key)
);

CREATE TABLE session_affinity_pins (
    pin_id        TEXT PRIMARY KEY,
    api_key_id    TEXT NOT NULL,
    provider      TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX session_affinity_pins_conn ON session_affinity_pins(connection_id);

-- seq replaces SQLite's implicit rowid as the insertion-order tiebreak.
CREATE TABLE exclusive_leases (
    id            TEXT PRIMARY KEY,
    seq           BIGINT GENERATED ALWAYS AS IDENTITY,
    owner_hash    TEXT NOT NULL,
    api_key_id    TEXT NOT NULL,
    provider      TEXT NOT NULL,
    connection_id TEXT NOT NULL,
    generation    BIGINT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('active', 'released', 'expired', 'invalidated')),
    acquired_at   BIGINT NOT NULL,
    renewed_at    BIGINT NOT NULL,
    expires_at    BIGINT NOT NULL,
    ended_at      BIGINT,
    end_reason    TEXT
);
CREATE UNIQUE INDEX exclusive_leases_owner_active ON exclusive_leases(owner_hash) WHERE state = 'active';
CREATE UNIQUE INDEX exclusive_leases_conn_active ON exclusive_leases(connection_id) WHERE state = 'active';

CREATE TABLE learned_rate_limits (
    limiter_key    TEXT PRIMARY KEY,
    limit_requests INTEGER,
    remaining      INTEGER,
    reset_at       BIGINT,
    min_time_ms    BIGINT,
    updated_at     BIGINT NOT NULL
);

CREATE TABLE learned_tool_limits (
    provider   TEXT NOT NULL,
    model      TEXT NOT NULL,
    max_tools  INTEGER NOT NULL,
    source     TEXT NOT NULL,
    learned_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (provider, model)
);

CREATE TABLE quota_windows (
    connection_id TEXT NOT NULL,
    "window"      TEXT NOT NULL,
    used_percent  DOUBLE PRECISION,
    remaining     BIGINT,
    limit_value   BIGINT,
    reset_at      BIGINT,
    source        TEXT NOT NULL DEFAULT '',
    observed_at   BIGINT NOT NULL,
    PRIMARY KEY (connection_id, "window")
);

CREATE TABLE request_logs (
    id                  TEXT PRIMARY KEY,
    created_at          BIGINT NOT NULL,
    client_request_id   TEXT NOT NULL DEFAULT '',
    api_key_id          TEXT NOT NULL DEFAULT '',
    api_key_name        TEXT NOT NULL DEFAULT '',
    api_key_prefix      TEXT NOT NULL DEFAULT '',
    method              TEXT NOT NULL DEFAULT 'POST',
    endpoint            TEXT NOT NULL,
    inbound_format      TEXT NOT NULL DEFAULT '',
    stream              BOOLEAN NOT NULL DEFAULT FALSE,
    stream_outcome      TEXT NOT NULL DEFAULT '',
    requested_model     TEXT NOT NULL DEFAULT '',
    resolved_kind       TEXT NOT NULL DEFAULT '',
    combo_name          TEXT NOT NULL DEFAULT '',
    combo_path          TEXT NOT NULL DEFAULT '',
    strategy            TEXT NOT NULL DEFAULT '',
    provider            TEXT NOT NULL DEFAULT '',
    model               TEXT NOT NULL DEFAULT '',
    connection_id       TEXT NOT NULL DEFAULT '',
    upstream_format     TEXT NOT NULL DEFAULT '',
    status              INTEGER NOT NULL DEFAULT 0,
    outcome             TEXT NOT NULL DEFAULT '',
    error_code          TEXT NOT NULL DEFAULT '',
    attempts            INTEGER NOT NULL DEFAULT 0,
    attempt_log         TEXT NOT NULL DEFAULT '[]',
    prompt_tokens       BIGINT NOT NULL DEFAULT 0,
    cached_tokens       BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens  BIGINT NOT NULL DEFAULT 0,
    completion_tokens   BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens    BIGINT NOT NULL DEFAULT 0,
    latency_ms          BIGINT NOT NULL DEFAULT 0,
    ttft_ms             BIGINT,
    upstream_latency_ms BIGINT NOT NULL DEFAULT 0,
    warnings            TEXT NOT NULL DEFAULT '[]',
    affinity_hit        BOOLEAN NOT NULL DEFAULT FALSE,
    lease_managed       BOOLEAN NOT NULL DEFAULT FALSE,
    emergency_fallback  BOOLEAN NOT NULL DEFAULT FALSE,
    bodies_captured     BOOLEAN NOT NULL DEFAULT FALSE,
    bodies              TEXT
);
CREATE INDEX request_logs_time ON request_logs(created_at DESC, id DESC);
