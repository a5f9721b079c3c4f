-- The targets a request passed over (issue 21, 40-admin-api §8 attemptLog
-- entries with "skipped", 50-dashboard §6.7 "the reason a target was
-- skipped").
--
-- request_logs.skips: a JSON array of
-- {target, connectionId, reason, detail, retryAfterMs, atOffsetMs,
-- afterAttempts}, in the order the walk skipped them. NULL on rows written
-- before, and on requests that skipped nothing.
ALTER TABLE request_logs ADD COLUMN skips TEXT;
