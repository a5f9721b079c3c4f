-- State that several replicas share through one database; see ../0006.
ALTER TABLE connections ADD COLUMN state_version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE model_lockouts ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
ALTER TABLE domain_circuit_breakers ADD COLUMN half_open_in_flight INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domain_circuit_breakers ADD COLUMN probe_until BIGINT;
CREATE TABLE admin_login_failures (
    client_ip TEXT NOT NULL,
    at        BIGINT NOT NULL
);
CREATE INDEX admin_login_failures_ip ON admin_login_failures(client_ip, at);
CREATE INDEX admin_login_failures_at ON admin_login_failures(at);
CREATE TABLE feed_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);
INSERT INTO feed_version (id, version) VALUES (1, 0);
