package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
	"google.golang.org/grpc"
)

// BenchmarkTaskStart measures task start latency on this machine: from the
// master sending a start request over gRPC on loopback to the task's own
// code running (it creates a file), with the task's cgroup container made
// on the way. Reports the median as p50-ms, and the median time for the
// poll to reply (process forked and exec'd) as poll-p50-ms.
func BenchmarkTaskStart(b *testing.B) {
	dir := b.TempDir()
	c := startBenchAgent(b, dir)
	ctx := context.Background()

	var starts, polls []time.Duration
	var acked uint64 // the master acknowledges the events it has seen
	var done []*events.TaskRef
	b.ReportAllocs()
	// A fine ticker polls for each task's marker: its period bounds how
	// precisely the start latency is measured.
	tick := time.NewTicker(50 * time.Microsecond)
	defer tick.Stop()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		marker := filepath.Join(dir, fmt.Sprintf("ran-%d", i))
		r := &events.TaskRef{User: "bench", Job: "touch", Index: int32(i)}
		begin := time.Now()
		st, err := c.Poll(ctx, &agentpb.PollRequest{Epoch: 1, EventsAcked: acked, Requests: []*agentpb.Request{
			StartRequest("s", r, 1, 0, &agentpb.TaskSpec{
				Command:   "touch",
				Args:      []string{marker},
				Resources: &events.Resources{CpuMilli: 500, MemoryBytes: 64 << 20},
				Restart:   &events.RestartPolicy{Mode: "never"},
			}),
		}})
		if err != nil || st.Results[0].Error != "" {
			b.Fatalf("start: %v %v", err, st.GetResults())
		}
		polled := time.Since(begin)
		acked = st.LastEventSeq
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Since(begin) > 10*time.Second {
				b.Fatalf("task %d never ran", i)
			}
			<-tick.C
		}
		starts = append(starts, time.Since(begin))
		polls = append(polls, polled)
		done = append(done, r)
		if len(done) == 50 {
			b.StopTimer()
			forgetAll(b, c, done)
			done = nil
			b.StartTimer()
		}
	}
	b.StopTimer()
	forgetAll(b, c, done)
	b.ReportMetric(median(starts), "p50-ms")
	b.ReportMetric(median(polls), "poll-p50-ms")
}

// startBenchAgent serves an agent with real processes and cgroups over
// gRPC, and returns a client of it, connected.
func startBenchAgent(b *testing.B, dir string) *Client {
	ra := &realAgent{}
	cfg := Config{
		Name: "m1", DataDir: filepath.Join(dir, "data"), CgroupParent: fmt.Sprintf("corral-test-%d-bench/m1", os.Getpid()),
		MemoryLowWater: -1, Logger: quietLogger(),
	}
	a, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ra.Agent = a
	b.Cleanup(func() {
		_ = a.Close()
		testkit.RemoveCgroups(b, fmt.Sprintf("corral-test-%d-bench", os.Getpid()))
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	agentpb.RegisterAgentServer(srv, a)
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)
	c, err := Dial(lis.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if _, err := c.Poll(context.Background(), &agentpb.PollRequest{Epoch: 1}); err != nil { // connect
		b.Fatal(err)
	}
	return c
}

// forgetAll waits for the tasks to end and drops them from the agent.
func forgetAll(b *testing.B, c *Client, refs []*events.TaskRef) {
	for _, r := range refs {
		testkit.Eventually(b, 10*time.Second, fmt.Sprintf("task %v ends", r), func() (bool, string) {
			st, err := c.Poll(context.Background(), &agentpb.PollRequest{Epoch: 1, Requests: []*agentpb.Request{ForgetRequest("f", r)}})
			if err != nil {
				b.Fatal(err)
			}
			return st.Results[0].Error == "", st.Results[0].Error
		})
	}
}

func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
