package auth

import (
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Default caps on long calls (log streams, event watches, and the web
// UI's live logs and events, which are the same calls). A
// person follows a few tasks at a time and a script tails at most a job's
// worth, so 32 a user leaves room for both while one user can hold only a
// sixteenth of the cell's 512. Each open stream costs the master a
// goroutine pair and up to two flow-control windows (about 128 KiB), so
// 512 bound the master's share to about 64 MiB, and they are spread over
// the agents, each capping its own (agent.DefaultMaxLogStreams).
const (
	DefaultMaxStreamsPerUser = 32
	DefaultMaxStreams        = 512
)

// StreamCaps bounds the long calls open at once: PerUser for each user
// and Total over the cell. A call past either is refused at once with
// ResourceExhausted naming the cap, never queued: a held stream lasts as
// long as its reader wants, so waiting for a slot could take forever.
// Every long call, from the API or the web UI, takes its slot here, so one
// rule holds for both. The zero value caps nothing; a nil *StreamCaps
// too.
type StreamCaps struct {
	PerUser int // 0: no cap per user
	Total   int // 0: no cap over the cell

	mu     sync.Mutex
	byUser map[string]int
	total  int
}

// Open takes a slot for user, or refuses with ResourceExhausted naming
// the cap that is full (and the flag that sets it). release gives the
// slot back; it is safe to call more than once.
func (c *StreamCaps) Open(user string) (release func(), err error) {
	if c == nil {
		return func() {}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.PerUser > 0 && c.byUser[user] >= c.PerUser {
		return nil, status.Errorf(codes.ResourceExhausted,
			"%s has %d streams open (task logs and event watches), the cap per user (--max-streams-per-user %d): end one (a `corral task logs -f`, `corral events -f` or a browser tab) and retry",
			user, c.byUser[user], c.PerUser)
	}
	if c.Total > 0 && c.total >= c.Total {
		return nil, status.Errorf(codes.ResourceExhausted,
			"the cell has %d streams open (task logs and event watches), its cap (--max-streams %d): retry later", c.total, c.Total)
	}
	if c.byUser == nil {
		c.byUser = map[string]int{}
	}
	c.byUser[user]++
	c.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if c.byUser[user]--; c.byUser[user] <= 0 {
				delete(c.byUser, user) // users come and go: keep only those with streams
			}
		})
	}, nil
}
