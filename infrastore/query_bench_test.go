package infrastore

import (
	"context"
	"testing"
	"time"
)

// BenchmarkQueryResult is what a query of a whole 10,000-row result
// costs, end to end through Query: the guard, the bounded statement
// (bounded.go) and reading the rows. Of a narrow and a wide result, with
// strings and a list; of an aggregate; and of a scan of 100 million rows
// that returns a thousand (the bounded statement's running total must not
// cost the scan its parallel threads).
func BenchmarkQueryResult(b *testing.B) {
	ctx := context.Background()
	s := openStore(b, Options{Threads: 2, MaxRows: 10_000, MaxResultBytes: 64 << 20})
	for _, c := range []struct{ name, query string }{
		{"narrow", `SELECT i FROM range(10000) t(i)`},
		{"wide", `SELECT i, i * 2.5 AS f, 'row ' || i AS s, repeat('x', 100) AS pad, [i, i + 1] AS l FROM range(10000) t(i)`},
		{"aggregate", `SELECT i % 7 AS k, count(*) AS n FROM range(10000000) t(i) GROUP BY ALL ORDER BY ALL`},
		{"selective_scan", `SELECT i, i * 2 AS j FROM range(100000000) t(i) WHERE i % 100003 = 0`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				res, err := s.Query(ctx, c.query, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Rows) == 0 || res.Truncated {
					b.Fatalf("%d rows, truncated %v", len(res.Rows), res.Truncated)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1000, "ms/query")
		})
	}
}
