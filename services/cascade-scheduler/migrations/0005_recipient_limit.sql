-- Recipients per StartCascade request, per organization (the API's limit of 500 is the ceiling).
ALTER TABLE organization_settings ADD COLUMN max_recipients integer NOT NULL DEFAULT 500 CHECK (max_recipients BETWEEN 1 AND 500);
