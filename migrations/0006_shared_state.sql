-- State that several replicas share through one database (scale-out §3.8).
-- state_version / version: compare-and-set counters of the decisions
-- (cooldowns and terminal states, model lockouts); every decision write
-- checks and bumps them, so concurrent failures on two replicas make one
-- episode. half_open_in_flight / probe_until: the breaker's half-open probes
-- counted for the fleet. admin_login_failures: the sign-in throttle counted
-- across replicas. feed_version: the change feed's sequence, polled to
-- detect lost notifications (embedded mode never reads it).
ALTER TABLE connections ADD COLUMN state_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE model_lockouts ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domain_circuit_breakers ADD COLUMN half_open_in_flight INTEGER NOT NULL DEFAULT 0;
ALTER TABLE domain_circuit_breakers ADD COLUMN probe_until INTEGER;
CREATE TABLE admin_login_failures (
    client_ip TEXT NOT NULL,
    at        INTEGER NOT NULL
);
CREATE INDEX admin_login_failures_ip ON admin_login_failures(client_ip, at);
CREATE INDEX admin_login_failures_at ON admin_login_failures(at);
CREATE TABLE feed_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);
INSERT INTO feed_version (id, version) VALUES (1, 0);
