-- Context-relay handoffs (30-routing §10.4).
CREATE TABLE context_handoffs (
    id                   TEXT PRIMARY KEY,
    source_connection_id TEXT NOT NULL,
    payload              TEXT NOT NULL,
    injected             TEXT NOT NULL DEFAULT '[]',
    expires_at           BIGINT NOT NULL
);
