-- What the operator views need; see ../0007_operator_views.sql. Instants
-- and the nano-dollar cost are BIGINT (INTEGER is 32-bit here).
ALTER TABLE request_logs ADD COLUMN estimated_cost_nano_usd BIGINT;
ALTER TABLE request_logs ADD COLUMN attempted_connections TEXT NOT NULL DEFAULT '';
ALTER TABLE request_logs ADD COLUMN attempted_providers TEXT NOT NULL DEFAULT '';
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    created_at  BIGINT NOT NULL,
    actor_kind  TEXT NOT NULL,
    actor_id    TEXT NOT NULL,
    actor_name  TEXT NOT NULL DEFAULT '',
    key_prefix  TEXT NOT NULL DEFAULT '',
    client_ip   TEXT NOT NULL DEFAULT '',
    user_agent  TEXT NOT NULL DEFAULT '',
    request_id  TEXT NOT NULL DEFAULT '',
    method      TEXT NOT NULL,
    route       TEXT NOT NULL,
    path        TEXT NOT NULL,
    action      TEXT NOT NULL DEFAULT '',
    target_id   TEXT NOT NULL DEFAULT '',
    status      INTEGER NOT NULL,
    changes     TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX audit_log_time ON audit_log(created_at DESC, id DESC);
