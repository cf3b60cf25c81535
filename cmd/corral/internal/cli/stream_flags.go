package cli

import (
	"github.com/corralhq/corral/commands/auth"
	"github.com/spf13/pflag"
)

// streamFlags are the caps on long calls (log streams, event watches) open
// at once: per user and over the cell (auth.StreamCaps).
type streamFlags struct{ perUser, total int }

func (s *streamFlags) add(f *pflag.FlagSet) {
	f.IntVar(&s.perUser, "max-streams-per-user", auth.DefaultMaxStreamsPerUser, "streams (task logs, event watches, the web UI's live logs and events) one user may have open at once; 0: no cap")
	f.IntVar(&s.total, "max-streams", auth.DefaultMaxStreams, "streams (task logs, event watches) the cell serves at once over all users; 0: no cap")
}

func (s streamFlags) check() error {
	if s.perUser < 0 {
		return usageErr("--max-streams-per-user %d: want 0 (no cap) or more", s.perUser)
	}
	if s.total < 0 {
		return usageErr("--max-streams %d: want 0 (no cap) or more", s.total)
	}
	return nil
}
