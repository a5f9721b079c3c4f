-- The attempt timeline of a request; see ../0008_request_timeline.sql.
ALTER TABLE request_logs ADD COLUMN waits TEXT;
