-- The cell's event log on an embedded SQLite file (one machine).
-- Times are stored as Unix microseconds.

CREATE TABLE IF NOT EXISTS events (
    position        INTEGER NOT NULL PRIMARY KEY,
    stream          TEXT    NOT NULL,
    stream_version  INTEGER NOT NULL,
    type            TEXT    NOT NULL,
    schema_version  INTEGER NOT NULL,
    occurred_at     INTEGER NOT NULL,
    recorded_at     INTEGER NOT NULL,
    actor           TEXT    NOT NULL DEFAULT '',
    causation_id    TEXT    NOT NULL DEFAULT '',
    correlation_id  TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    NOT NULL DEFAULT '',
    payload         BLOB    NOT NULL
);

CREATE UNIQUE INDEX IF NOT EXISTS events_stream_version ON events (stream, stream_version);

CREATE TABLE IF NOT EXISTS requests (
    idempotency_key TEXT    NOT NULL PRIMARY KEY,
    first_position  INTEGER NOT NULL,
    last_position   INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    holder     TEXT    NOT NULL,
    epoch      INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS checkpoints (
    name     TEXT    NOT NULL,
    position INTEGER NOT NULL,
    taken_at INTEGER NOT NULL,
    state    BLOB    NOT NULL,
    PRIMARY KEY (name, position)
);
