-- Connection ladder state (20-resilience §4.3, §9).
-- last_auth_fail_at: when the auth ladder last counted a failure; its 24 h
-- restart window is measured from it, not from last_error_at, which every
-- later failure moves.
-- cooldown_reason: the reason that wrote rate_limited_until; it decides
-- whether a cooldown-aware wait may sleep the deadline out, whatever errors
-- the episode absorbed afterwards.
ALTER TABLE connections ADD COLUMN last_auth_fail_at INTEGER;
ALTER TABLE connections ADD COLUMN cooldown_reason TEXT NOT NULL DEFAULT '';
-- Existing rows: the best knowledge there is. A running auth ladder counts
-- from its latest error; a stored deadline keeps the latest reason.
UPDATE connections SET last_auth_fail_at = last_error_at WHERE auth_fail_count > 0;
UPDATE connections SET cooldown_reason = last_error_reason WHERE rate_limited_until IS NOT NULL;
