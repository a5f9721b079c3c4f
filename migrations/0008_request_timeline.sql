-- The attempt timeline of a request (issue 21, 50-dashboard §6.7,
-- 40-admin-api §8).
--
-- request_logs.waits: a JSON array of the request's waits — cooldown-aware
-- waits, retry delays, slot and queue waits — each
-- {kind, reason, target, startOffsetMs, waitedMs}, so that the attempts
-- (whose attempt_log entries now carry startOffsetMs, hintMs and effects)
-- plus the waits add up to latency_ms. NULL on rows written before: their
-- attempts have no start offsets, and the timeline says so.
ALTER TABLE request_logs ADD COLUMN waits TEXT;
