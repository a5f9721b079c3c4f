-- What the operator views need (issue 21 part A).
--
-- request_logs.estimated_cost_nano_usd: the request's estimated price in
-- billionths of a US dollar, from the model price table (built-in list
-- prices or the admin's override in the general settings document,
-- pricing.models) at the time of the request; NULL when no price is known.
-- An integer so sums are exact in both dialects.
--
-- request_logs.attempted_connections / attempted_providers: every
-- connection and provider an attempt was dispatched to, as ",c_1,c_7,"
-- (empty when none), so the log's connection and provider filters find a
-- request on the connection that failed and not only on the one that
-- finally served.
--
-- audit_log: one row per successful admin mutation (40-admin-api §1 Audit),
-- written in batches like request_logs and pruned with them
-- (logging.retentionDays). actor_kind is session or key; actor_id the
-- session's internal id (a hash prefix, never the cookie) or the key id;
-- changes a JSON array of {path, before, after} of the settings a request
-- changed, secrets redacted.
ALTER TABLE request_logs ADD COLUMN estimated_cost_nano_usd INTEGER;
ALTER TABLE request_logs ADD COLUMN attempted_connections TEXT NOT NULL DEFAULT '';
ALTER TABLE request_logs ADD COLUMN attempted_providers TEXT NOT NULL DEFAULT '';
CREATE TABLE audit_log (
    id          TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
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
