-- The cell's event log. The same statements run on CockroachDB and PostgreSQL.

-- One row per event. position is assigned by the single writer inside the
-- append transaction (head + 1, ...), so it has no gaps.
CREATE TABLE IF NOT EXISTS events (
    position        INT8        NOT NULL PRIMARY KEY,
    stream          TEXT        NOT NULL,
    stream_version  INT8        NOT NULL,
    type            TEXT        NOT NULL,
    schema_version  INT4        NOT NULL,
    occurred_at     TIMESTAMPTZ NOT NULL,
    recorded_at     TIMESTAMPTZ NOT NULL,
    actor           TEXT        NOT NULL DEFAULT '',
    causation_id    TEXT        NOT NULL DEFAULT '',
    correlation_id  TEXT        NOT NULL DEFAULT '',
    idempotency_key TEXT        NOT NULL DEFAULT '',
    payload         BYTEA       NOT NULL
);

-- ReadStream and the per-stream version lookup of every append.
CREATE UNIQUE INDEX IF NOT EXISTS events_stream_version ON events (stream, stream_version);

-- Idempotency keys of appended requests and where their events landed.
CREATE TABLE IF NOT EXISTS requests (
    idempotency_key TEXT NOT NULL PRIMARY KEY,
    first_position  INT8 NOT NULL,
    last_position   INT8 NOT NULL
);

-- Leases for leader election; the epoch fences appends.
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT        NOT NULL PRIMARY KEY,
    holder     TEXT        NOT NULL,
    epoch      INT8        NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Projection snapshots: a cache of the log, never the source of truth.
CREATE TABLE IF NOT EXISTS checkpoints (
    name     TEXT        NOT NULL,
    position INT8        NOT NULL,
    taken_at TIMESTAMPTZ NOT NULL,
    state    BYTEA       NOT NULL,
    PRIMARY KEY (name, position)
);
