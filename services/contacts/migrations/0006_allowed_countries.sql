-- The regions whose phone numbers the phone channels send to (proto/src/phones.ts); empty = the
-- organization's default region only, which is what every existing organization gets.
ALTER TABLE organizations
  ADD COLUMN allowed_countries text[] NOT NULL DEFAULT '{}' CHECK (cardinality(allowed_countries) <= 250);
