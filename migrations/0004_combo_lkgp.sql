-- Last-known-good record per combo (30-routing §10.15): the entry and the
-- connection of the last success that changed it. Survives restarts.
CREATE TABLE combo_lkgp (
    combo_id      TEXT PRIMARY KEY,
    entry_id      TEXT NOT NULL,
    connection_id TEXT NOT NULL DEFAULT '',
    updated_at    INTEGER NOT NULL
);
