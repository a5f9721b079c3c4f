-- Known model ids of a custom compatible provider, as a JSON array.
ALTER TABLE custom_providers ADD COLUMN models TEXT NOT NULL DEFAULT '[]';
