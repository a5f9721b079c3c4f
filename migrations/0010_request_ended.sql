-- When a request ended, for the Request logs live tail (issue 21 item 4,
-- 50-dashboard §6.7): rows are listed by when the request was received
-- (created_at) but written when it ends, so a long stream that ends after
-- a newer request was shown would never reach a tail that follows
-- created_at. The tail follows ended_at (created_at + latency_ms, in Unix
-- milliseconds) instead, through its own index. NULL on rows written
-- before (they ended long before any tail that reads this column).
ALTER TABLE request_logs ADD COLUMN ended_at INTEGER;
CREATE INDEX request_logs_ended ON request_logs(ended_at DESC, id DESC);
