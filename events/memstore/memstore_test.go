package memstore

import (
	"testing"
	"time"

	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/storetest"
)

// The in-memory store passes the conformance suite the real backends
// pass: what the simulation proves about fencing and expected positions
// holds for the rules pgstore and sqlitestore follow.
func TestStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		New: func(t testing.TB, clock func() time.Time) func() events.Store {
			l := NewLog()
			return func() events.Store { return l.Open(clock) }
		},
		Corrupt: func(t testing.TB, s events.Store, position int64, typ string, payload []byte) {
			s.(*Store).Log().Corrupt(position, typ, payload)
		},
	})
}
