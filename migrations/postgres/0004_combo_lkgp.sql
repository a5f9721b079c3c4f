-- Last-known-good record per combo (30-routing §10.15).
CREATE TABLE combo_lkgp (
    combo_id      TEXT PRIMARY KEY,
    entry_id      TEXT NOT NULL,
    connection_id TEXT NOT NULL DEFAULT '',
    updated_at    BIGINT NOT NULL
);
