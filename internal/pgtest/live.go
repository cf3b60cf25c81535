package pgtest

import (
	"errors"
	"sync"
)

// live holds every server not yet closed: Main closes what tests left, and
// holding them keeps each watchdog's pipe from being closed by the garbage
// collector, which would stop a server still in use.
var live = liveServers{m: map[*Server]struct{}{}}

type liveServers struct {
	sync.Mutex
	m map[*Server]struct{}
}

func (l *liveServers) add(s *Server) {
	l.Lock()
	defer l.Unlock()
	l.m[s] = struct{}{}
}

func (l *liveServers) remove(s *Server) {
	l.Lock()
	defer l.Unlock()
	delete(l.m, s)
}

// closeLive closes every server still open.
func closeLive() error {
	live.Lock()
	var open []*Server
	for s := range live.m {
		open = append(open, s)
	}
	live.Unlock()
	var errs []error
	for _, s := range open {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
