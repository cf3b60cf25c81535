package ops_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corralhq/corral/commands/ops"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/events/storetest"
)

// The instrumented store is what the master writes through in every
// binary, so it passes the conformance suite over every backend it can
// decorate: a metric that swallowed an error or a sentinel would show here.
func TestInstrumentedStoreConformance(t *testing.T) {
	for _, b := range storetest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			storetest.Run(t, storetest.Decorated(b.Backend, func(s events.Store) events.Store {
				return ops.InstrumentStore(s, prometheus.NewRegistry())
			}))
		})
	}
}
