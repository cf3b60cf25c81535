ALTER TABLE requests DROP COLUMN fingerprint;
