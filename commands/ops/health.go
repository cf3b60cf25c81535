package ops

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/corralhq/corral/commands/master"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/projections"
)

// NewRegistry returns a registry holding the Go runtime's and the
// process's collectors, for the corral series to join.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// MetricsHandler serves g in the Prometheus text format (/metrics).
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Check is one readiness check: nil when it passes, else what is wrong.
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

// Readyz runs every check (each within timeout) and answers 200 when all
// pass, 503 otherwise, listing each check as "[+]name ok" or "[-]name:
// reason", as Kubernetes' own components do.
func Readyz(timeout time.Duration, checks ...Check) http.Handler {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		var b strings.Builder
		ok := true
		for _, c := range checks {
			if err := c.Run(ctx); err != nil {
				ok = false
				fmt.Fprintf(&b, "[-]%s: %v\n", c.Name, err)
			} else {
				fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			b.WriteString("not ready\n")
		} else {
			b.WriteString("ready\n")
		}
		_, _ = w.Write([]byte(b.String()))
	})
}

// DefaultMaxLag is how many events a master's projection may trail the
// log's head and still be ready.
const DefaultMaxLag = 1000

// MasterChecks are the readiness checks of a master replica:
//
//	store       the event store answers (its head is read)
//	caught-up   the projection trails the head by at most maxLag events
//	leader      a leader holds an unexpired lease (this replica or another)
func MasterChecks(m *master.Master, maxLag int64) []Check {
	if maxLag <= 0 {
		maxLag = DefaultMaxLag
	}
	store := m.Store()
	return []Check{
		{"store", func(ctx context.Context) error {
			if _, err := headOf(ctx, store); err != nil {
				return fmt.Errorf("the event store does not answer: %w", err)
			}
			return nil
		}},
		{"caught-up", func(ctx context.Context) error {
			head, err := headOf(ctx, store)
			if err != nil {
				return fmt.Errorf("the log's head is unknown: %w", err)
			}
			if pos := m.Position(); head-pos > maxLag {
				return fmt.Errorf("the projection is at position %d, %d events behind the head %d (at most %d allowed)", pos, head-pos, head, maxLag)
			}
			return nil
		}},
		{"leader", func(ctx context.Context) error { return leaderKnown(ctx, m, store) }},
	}
}

// leaderKnown checks that someone holds the leader lease now.
func leaderKnown(ctx context.Context, m *master.Master, store events.Leases) error {
	if m.Leading() {
		return nil
	}
	l, ok, err := store.CurrentLease(ctx, events.LeaderLease)
	if err != nil {
		return fmt.Errorf("reading the leader lease: %w", err)
	}
	if !ok || l.Holder == "" {
		return fmt.Errorf("no master has ever held the leader lease")
	}
	if time.Now().After(l.ExpiresAt) {
		var logged string
		m.View(func(s *projections.State) { logged = s.Leader })
		return fmt.Errorf("no leader: the lease of %s (epoch %d) expired at %s; the log's last leader is %q",
			l.Holder, l.Epoch, l.ExpiresAt.Format(time.RFC3339), logged)
	}
	// Between taking the lease and recording its election no master
	// serves writes: the cell is not ready until the log names the
	// lease's epoch.
	var epoch int64
	m.View(func(s *projections.State) { epoch = s.LeaderEpoch })
	if epoch < l.Epoch {
		return fmt.Errorf("no leader yet: %s holds the lease at epoch %d but the log records no election at that epoch (last: %d)", l.Holder, l.Epoch, epoch)
	}
	return nil
}
