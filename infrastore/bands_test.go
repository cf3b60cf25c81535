package infrastore

import (
	"context"
	"database/sql"
	"testing"

	"github.com/corralhq/corral/events"
)

// The band a row's priority gets in SQL is the band events.BandOf names,
// for every priority at and beyond each band's edges, and NULL for none.
func TestBandSQLIsBandOf(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	for p := int32(-2); p <= events.MaxPriority+2; p++ {
		var got string
		if err := s.db.QueryRowContext(ctx, `SELECT `+bandSQL("p")+` FROM (SELECT ?::INTEGER AS p)`, p).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := events.BandOf(p).String(); got != want || bandOf(p) != want {
			t.Errorf("priority %d: SQL says %q, bandOf %q, events.BandOf %q", p, got, bandOf(p), want)
		}
	}
	var null sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT `+bandSQL("p")+` FROM (SELECT NULL::INTEGER AS p)`).Scan(&null); err != nil || null.Valid {
		t.Errorf("NULL priority: %v %v, want NULL", null, err)
	}
}
