package memstore_test

import (
	"testing"

	"github.com/corralhq/corral/events/storetest"
)

// The in-memory store passes the conformance suite the real backends
// pass: what the simulation proves about fencing and expected positions
// holds for the rules pgstore and sqlitestore follow.
func TestStoreConformance(t *testing.T) {
	storetest.Run(t, storetest.Memory)
}
