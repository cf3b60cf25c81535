package infrastore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// Log reads the log back out of the Infrastore's events table, for a
// reader that has the file and not the cell's store (a replay of a copied
// Infrastore, `corral sim --infrastore`). The table holds every event
// with its payload as JSON of the current schema, so each event comes
// back as the catalogue's message at the current version. A state is
// folded from the ingester's checkpoint of the fold (fold_checkpoint) when
// it is at or before the position asked, else from the beginning.
func (s *Infrastore) Log() projections.Source { return logSource{s} }

type logSource struct{ s *Infrastore }

// Head is the last position the Infrastore holds.
func (l logSource) Head(ctx context.Context) (int64, error) { return l.s.Position(ctx) }

// LoadCheckpoint returns the ingester's checkpoint of the fold
// (fold_checkpoint, the projection's codec) when it is of the cell state
// and at or before atOrBefore, so a replay starts there.
func (l logSource) LoadCheckpoint(ctx context.Context, name string, atOrBefore int64) (events.Checkpoint, bool, error) {
	if name != projections.CheckpointName {
		return events.Checkpoint{}, false, nil
	}
	var cp events.Checkpoint
	found := false
	err := l.s.inReadOnly(ctx, func(conn *sql.Conn) error {
		err := conn.QueryRowContext(ctx, `SELECT position, state FROM fold_checkpoint WHERE position <= ?`, atOrBefore).Scan(&cp.Position, &cp.State)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return events.Checkpoint{}, false, fmt.Errorf("infrastore: reading the fold's checkpoint: %w", err)
	}
	cp.Name = name
	return cp, found, nil
}

// Read returns up to limit events from position from on, in order.
func (l logSource) Read(ctx context.Context, from int64, limit int) ([]events.Event, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []events.Event
	err := l.s.inReadOnly(ctx, func(conn *sql.Conn) error {
		var err error
		out, err = readEvents(ctx, conn, from, int64(limit))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("infrastore: reading the log from position %d: %w", from, err)
	}
	return out, nil
}

// decodePayloadJSON fills e.Data (and its schema version, the catalogue's
// current one) from the JSON the events table keeps.
func decodePayloadJSON(e *events.Event, payload sql.NullString) error {
	k, ok := events.Lookup(e.Type)
	if !ok {
		return fmt.Errorf("position %d: type %q is not in the catalogue", e.Position, e.Type)
	}
	if !payload.Valid || payload.String == "null" {
		// payloadJSON stores null for a payload protojson cannot write
		// (a string that is not UTF-8): it cannot be read back.
		return fmt.Errorf("position %d: the %s payload was stored as null", e.Position, e.Type)
	}
	p := k.New()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(payload.String), p); err != nil {
		return fmt.Errorf("position %d: %s payload: %w", e.Position, e.Type, err)
	}
	e.Data, e.SchemaVersion = p, k.SchemaVersion
	return nil
}
