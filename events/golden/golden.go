package golden

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/corralhq/corral/events"
)

type record struct {
	Position       int64     `json:"p"`
	Stream         string    `json:"s"`
	StreamVersion  int64     `json:"v"`
	Type           string    `json:"t"`
	SchemaVersion  int32     `json:"sv"`
	OccurredAt     time.Time `json:"o"`
	RecordedAt     time.Time `json:"r"`
	Actor          string    `json:"a,omitempty"`
	CausationID    string    `json:"c,omitempty"`
	CorrelationID  string    `json:"k,omitempty"`
	IdempotencyKey string    `json:"i,omitempty"`
	Data           []byte    `json:"d"`
}

// Write writes evs to w, gzip'd.
func Write(w io.Writer, evs []events.Event) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(zw)
	enc := json.NewEncoder(bw)
	for _, e := range evs {
		raw, err := events.Encode(e.Data)
		if err != nil {
			return fmt.Errorf("golden: event %d: %w", e.Position, err)
		}
		if err := enc.Encode(record{e.Position, e.Stream, e.StreamVersion, e.Type, e.SchemaVersion, e.OccurredAt.UTC(), e.RecordedAt.UTC(),
			e.Actor, e.CausationID, e.CorrelationID, e.IdempotencyKey, raw}); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return zw.Close()
}

// Read reads the events of a file written by Write.
func Read(r io.Reader) ([]events.Event, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("golden: %w", err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(zr, 1<<16))
	var out []events.Event
	for {
		var rec record
		if err := dec.Decode(&rec); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("golden: after %d events: %w", len(out), err)
		}
		data, err := events.Decode(rec.Position, rec.Type, rec.SchemaVersion, rec.Data)
		if err != nil {
			return nil, fmt.Errorf("golden: event %d: %w", rec.Position, err)
		}
		out = append(out, events.Event{Position: rec.Position, Stream: rec.Stream, StreamVersion: rec.StreamVersion, Type: rec.Type,
			SchemaVersion: rec.SchemaVersion, OccurredAt: rec.OccurredAt, RecordedAt: rec.RecordedAt, Actor: rec.Actor,
			CausationID: rec.CausationID, CorrelationID: rec.CorrelationID, IdempotencyKey: rec.IdempotencyKey, Data: data})
	}
}

// ReadFile reads the events of the file at path.
func ReadFile(path string) ([]events.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// WriteFile writes evs to the file at path, replacing it.
func WriteFile(path string, evs []events.Event) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := Write(f, evs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
