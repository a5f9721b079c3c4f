-- Context-relay handoffs (30-routing §10.4): one summary per (client key,
-- session, combo), keyed by a hash of the three, with the connection it was
-- made on and the destinations it was already given to.
CREATE TABLE context_handoffs (
    id                   TEXT PRIMARY KEY,
    source_connection_id TEXT NOT NULL,
    payload              TEXT NOT NULL,
    injected             TEXT NOT NULL DEFAULT '[]',
    expires_at           INTEGER NOT NULL
);
