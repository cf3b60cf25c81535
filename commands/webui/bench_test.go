package webui_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/events"
)

// bigJob is a cell of 100 machines and one job of 10,000 tasks: 9,500
// running, 500 pending.
func bigJob() []events.Event {
	h := &history{}
	for i := 0; i < 100; i++ {
		h.machine(fmt.Sprintf("m%d", i))
	}
	h.job("alice", "big", 4, 10_000, res(100, 64<<20), map[string]string{"team": "web"})
	for i := int32(0); i < 9_500; i++ {
		h.run("alice", "big", i, fmt.Sprintf("m%d", i%100))
	}
	return h.evs
}

// BenchmarkJobPage renders the page of a job of 10,000 tasks (the first
// page of its tasks, and one in the middle) through the real API over a
// log of about 29,000 events in SQLite. The issue asks for at most 300 ms.
func BenchmarkJobPage(b *testing.B) {
	c := openCell(b, bigJob())
	for _, bc := range []struct{ name, path string }{
		{"first-page", "/jobs/alice/big"},
		{"middle-page", "/jobs/alice/big?offset=5000"},
		{"pending", "/jobs/alice/big?state=pending"},
	} {
		path := bc.path
		b.Run(bc.name, func(b *testing.B) {
			code, body := c.get(b, path)
			if code != http.StatusOK || !strings.Contains(body, "/jobs/alice/big/tasks/") {
				b.Fatalf("GET %s: %d\n%.2000s", path, code, body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if code, _ := c.get(b, path); code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}
