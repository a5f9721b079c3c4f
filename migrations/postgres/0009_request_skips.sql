-- The targets a request passed over; see ../0009_request_skips.sql.
ALTER TABLE request_logs ADD COLUMN skips TEXT;
