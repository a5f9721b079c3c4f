-- Known model ids of a custom compatible provider (listed in /v1/models and
-- used for bare-name resolution), as a JSON array.
ALTER TABLE custom_providers ADD COLUMN models TEXT NOT NULL DEFAULT '[]';
