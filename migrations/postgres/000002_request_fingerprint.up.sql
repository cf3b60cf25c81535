-- What a request was: a digest of it, so an idempotency key reused for a
-- different request is refused rather than answered as a duplicate.
ALTER TABLE requests ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';
