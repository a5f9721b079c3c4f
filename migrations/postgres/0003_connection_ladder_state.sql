-- Connection ladder state (20-resilience §4.3, §9); see ../0003.
ALTER TABLE connections ADD COLUMN last_auth_fail_at BIGINT;
ALTER TABLE connections ADD COLUMN cooldown_reason TEXT NOT NULL DEFAULT '';
UPDATE connections SET last_auth_fail_at = last_error_at WHERE auth_fail_count > 0;
UPDATE connections SET cooldown_reason = last_error_reason WHERE rate_limited_until IS NOT NULL;
