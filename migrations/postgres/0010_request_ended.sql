-- When a request ended, for the live tail; see ../0010_request_ended.sql.
ALTER TABLE request_logs ADD COLUMN ended_at BIGINT;
CREATE INDEX request_logs_ended ON request_logs(ended_at DESC, id DESC);
