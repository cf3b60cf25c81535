package infrastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// loadModel recovers the ingester's fold at position, the file's stored
// position: the checkpoint in fold_checkpoint (the projection's codec),
// else the empty cell, then the events after it, read back from the events
// table (written in the same transactions as the position, so they reach
// it exactly). A checkpoint this build cannot decode is passed over: the
// events table holds the whole log.
func loadModel(ctx context.Context, conn *sql.Conn, position int64) (*model, error) {
	m := newModel()
	var at int64
	var raw []byte
	switch err := conn.QueryRowContext(ctx, `SELECT position, state FROM fold_checkpoint`).Scan(&at, &raw); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, err
	case at <= position:
		if st, err := projections.Decode(raw); err == nil && st.Position == at {
			m.st, m.checkpointed = st, at
		}
	}
	for m.st.Position < position {
		evs, err := readEvents(ctx, conn, m.st.Position+1, min(position-m.st.Position, replayBatch))
		if err != nil {
			return nil, err
		}
		if len(evs) == 0 {
			return nil, fmt.Errorf("the events table ends at position %d, before the stored position %d", m.st.Position, position)
		}
		if err := projections.ApplyAll(m.st, evs); err != nil {
			return nil, err
		}
	}

	// The job_specs row of each version; a name used again has the newer
	// rows (specPositions).
	rows, err := conn.QueryContext(ctx, `SELECT user, job, spec_version, max(position) FROM job_specs GROUP BY ALL`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var k specKey
		var pos int64
		if err := rows.Scan(&k.user, &k.job, &k.version, &pos); err != nil {
			rows.Close()
			return nil, err
		}
		m.specPositions[k] = pos
	}
	if err := closeRows(rows); err != nil {
		return nil, err
	}
	return m, nil
}

// replayBatch is how many events one read of a recovery asks for.
const replayBatch = 8192

// readEvents reads up to limit events of the events table from position
// from on, in order, as the catalogue's messages.
func readEvents(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, from, limit int64) ([]events.Event, error) {
	rows, err := q.QueryContext(ctx, `SELECT position, time, recorded_at, type, stream, stream_version,
		actor, causation_id, correlation_id, idempotency_key, CAST(payload AS VARCHAR)
		FROM events WHERE position >= ? ORDER BY position LIMIT ?`, from, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []events.Event
	for rows.Next() {
		var (
			e                                      events.Event
			recorded                               sql.NullTime
			streamVersion                          sql.NullInt64
			actor, causation, correlation, idemKey sql.NullString
			payload                                sql.NullString
		)
		if err := rows.Scan(&e.Position, &e.OccurredAt, &recorded, &e.Type, &e.Stream, &streamVersion,
			&actor, &causation, &correlation, &idemKey, &payload); err != nil {
			return nil, err
		}
		e.OccurredAt = e.OccurredAt.UTC()
		if recorded.Valid {
			e.RecordedAt = recorded.Time.UTC()
		}
		e.StreamVersion = streamVersion.Int64
		e.Actor, e.CausationID, e.CorrelationID, e.IdempotencyKey = actor.String, causation.String, correlation.String, idemKey.String
		if err := decodePayloadJSON(&e, payload); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func closeRows(rows *sql.Rows) error {
	return errors.Join(rows.Err(), rows.Close())
}
