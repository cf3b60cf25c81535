package nameservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/projections"
)

// Domain is the top of every cell's zone.
const Domain = "corral."

// Viewer is what the name service reads: a projection of the cell kept
// current, such as *master.Master.
type Viewer interface {
	View(fn func(s *projections.State))
}

// Config describes one name server.
type Config struct {
	// Cell names the cell: its zone is CELL.corral. Required.
	Cell string
	// TTL of every record, default 5 s.
	TTL time.Duration
	// Logger, default slog.Default().
	Logger *slog.Logger
}

// Server answers DNS queries for one cell. It is a dns.Handler.
type Server struct {
	v    Viewer
	zone string // "cell.corral."
	ttl  uint32
	log  *slog.Logger
}

// New returns a name server reading v.
func New(v Viewer, cfg Config) (*Server, error) {
	if v == nil {
		return nil, errors.New("nameservice: viewer: must be set")
	}
	if !commands.ValidName(cfg.Cell) {
		return nil, fmt.Errorf("nameservice: config.cell: %q must be a DNS label (lowercase letters, digits and '-')", cfg.Cell)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{v: v, zone: cfg.Cell + "." + Domain, ttl: uint32(cfg.TTL / time.Second), log: cfg.Logger.With("component", "dns")}, nil
}

// TaskName is the DNS name of one task, e.g. "0.hello.alice.dev.corral.".
func TaskName(index int32, job, user, cell string) string {
	return strconv.Itoa(int(index)) + "." + job + "." + user + "." + cell + "." + Domain
}

// JobName is the DNS name of a job's running tasks, e.g. "hello.alice.dev.corral.".
func JobName(job, user, cell string) string {
	return job + "." + user + "." + cell + "." + Domain
}

// ServeDNS answers one query.
func (s *Server) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := s.Answer(r)
	size := dns.MinMsgSize
	if _, udp := w.RemoteAddr().(*net.UDPAddr); !udp {
		size = dns.MaxMsgSize
	} else if opt := r.IsEdns0(); opt != nil {
		size = int(max(opt.UDPSize(), dns.MinMsgSize))
	}
	m.Truncate(size)
	if err := w.WriteMsg(m); err != nil {
		s.log.Debug("writing a reply", "err", err)
	}
}

// Answer builds the reply to a query.
func (s *Server) Answer(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 {
		m.SetRcode(r, dns.RcodeNotImplemented)
		return m
	}
	q := r.Question[0]
	name := strings.ToLower(dns.Fqdn(q.Name))
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		m.SetRcode(r, dns.RcodeRefused)
		return m
	}
	if name != s.zone && !strings.HasSuffix(name, "."+s.zone) {
		m.SetRcode(r, dns.RcodeRefused)
		return m
	}
	found := true
	if name == s.zone {
		switch q.Qtype {
		case dns.TypeSOA, dns.TypeANY:
			m.Answer = append(m.Answer, s.soa())
		case dns.TypeNS:
			m.Answer = append(m.Answer, &dns.NS{Hdr: s.hdr(s.zone, dns.TypeNS), Ns: "ns." + s.zone})
		}
	} else {
		labels := dns.SplitDomainName(strings.TrimSuffix(name, "."+s.zone))
		s.v.View(func(st *projections.State) {
			switch len(labels) {
			case 3:
				found = s.task(st, m, q.Qtype, labels[0], labels[1], labels[2])
			case 2:
				found = s.job(st, m, q.Qtype, labels[0], labels[1])
			case 1:
				// USER.CELL.corral. exists as a parent of the user's jobs.
				found = len(st.JobsOf(labels[0])) > 0
			default:
				found = false
			}
		})
	}
	if !found {
		m.Rcode = dns.RcodeNameError
	}
	if len(m.Answer) == 0 {
		m.Ns = append(m.Ns, s.soa())
	}
	return m
}

// task answers for INDEX.JOB.USER; it reports whether the name exists.
func (s *Server) task(st *projections.State, m *dns.Msg, qtype uint16, index, job, user string) bool {
	i, err := strconv.ParseInt(index, 10, 32)
	if err != nil || i < 0 || (len(index) > 1 && index[0] == '0') {
		return false
	}
	t := st.Task(user, job, int32(i))
	if t == nil {
		return false
	}
	name := TaskName(t.Index, job, user, strings.TrimSuffix(s.zone, "."+Domain))
	host, ok := s.host(st, t)
	if !ok {
		return true // exists, but has no address now
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA, dns.TypeCNAME:
		if rr := s.addr(name, host, qtype); rr != nil {
			m.Answer = append(m.Answer, rr)
		}
	case dns.TypeSRV:
		if srv := s.srv(name, name, t); srv != nil {
			m.Answer = append(m.Answer, srv)
			m.Extra = append(m.Extra, s.addrs(name, host)...)
		}
	case dns.TypeANY:
		m.Answer = append(m.Answer, s.addrs(name, host)...)
		if srv := s.srv(name, name, t); srv != nil {
			m.Answer = append(m.Answer, srv)
		}
	}
	return true
}

// job answers for JOB.USER: SRV records of every running task.
func (s *Server) job(st *projections.State, m *dns.Msg, qtype uint16, job, user string) bool {
	j := st.Job(user, job)
	if j == nil {
		return false
	}
	if qtype != dns.TypeSRV && qtype != dns.TypeANY {
		return true
	}
	cell := strings.TrimSuffix(s.zone, "."+Domain)
	name := JobName(job, user, cell)
	for _, t := range j.Tasks {
		if t == nil {
			continue
		}
		host, ok := s.host(st, t)
		if !ok {
			continue
		}
		target := TaskName(t.Index, job, user, cell)
		if srv := s.srv(name, target, t); srv != nil {
			m.Answer = append(m.Answer, srv)
			m.Extra = append(m.Extra, s.addrs(target, host)...)
		}
	}
	return true
}

// host is the address of a running task's machine.
func (s *Server) host(st *projections.State, t *projections.Task) (string, bool) {
	if t.State != projections.TaskRunning || t.Machine == "" {
		return "", false
	}
	mach := st.Machines[t.Machine]
	if mach == nil || mach.Address == "" {
		return "", false
	}
	host := mach.Address
	if h, _, err := net.SplitHostPort(mach.Address); err == nil {
		host = h
	}
	return host, host != ""
}

func (s *Server) hdr(name string, t uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: s.ttl}
}

// addr is the address record of name for host, of the type asked: A for
// an IPv4 host, AAAA for IPv6, CNAME for a host name.
func (s *Server) addr(name, host string, qtype uint16) dns.RR {
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return &dns.CNAME{Hdr: s.hdr(name, dns.TypeCNAME), Target: dns.Fqdn(host)}
	case ip.To4() != nil && qtype != dns.TypeAAAA:
		if qtype == dns.TypeCNAME {
			return nil
		}
		return &dns.A{Hdr: s.hdr(name, dns.TypeA), A: ip.To4()}
	case ip.To4() == nil && qtype != dns.TypeA:
		if qtype == dns.TypeCNAME {
			return nil
		}
		return &dns.AAAA{Hdr: s.hdr(name, dns.TypeAAAA), AAAA: ip}
	}
	return nil
}

func (s *Server) addrs(name, host string) []dns.RR {
	var out []dns.RR
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
		if rr := s.addr(name, host, t); rr != nil && !slices.ContainsFunc(out, func(o dns.RR) bool { return o.String() == rr.String() }) {
			out = append(out, rr)
		}
	}
	return out
}

// srv is the SRV record of a task's first port, nil when it has none.
func (s *Server) srv(name, target string, t *projections.Task) dns.RR {
	if len(t.Ports) == 0 || t.Ports[0] <= 0 || t.Ports[0] > 65535 {
		return nil
	}
	return &dns.SRV{Hdr: s.hdr(name, dns.TypeSRV), Priority: 0, Weight: 1, Port: uint16(t.Ports[0]), Target: target}
}

func (s *Server) soa() dns.RR {
	return &dns.SOA{Hdr: s.hdr(s.zone, dns.TypeSOA), Ns: "ns." + s.zone, Mbox: "hostmaster." + s.zone,
		Serial: 1, Refresh: 60, Retry: 30, Expire: 3600, Minttl: s.ttl}
}

// Serve answers on UDP and TCP at addr (host:port; port 0 picks a free one
// for both) until ctx ends. ready, when set, is called with the address
// once both listen.
func (s *Server) Serve(ctx context.Context, addr string, ready func(addr string)) error {
	pc, l, err := listen(addr)
	if err != nil {
		return fmt.Errorf("nameservice: listening on %s: %w", addr, err)
	}
	udp := &dns.Server{PacketConn: pc, Handler: s}
	tcp := &dns.Server{Listener: l, Handler: s}
	errc := make(chan error, 2)
	started := make(chan struct{}, 2)
	udp.NotifyStartedFunc = func() { started <- struct{}{} }
	tcp.NotifyStartedFunc = func() { started <- struct{}{} }
	go func() { errc <- udp.ActivateAndServe() }()
	go func() { errc <- tcp.ActivateAndServe() }()
	for i := 0; i < 2; i++ {
		select {
		case <-started:
		case err := <-errc:
			_ = udp.Shutdown()
			_ = tcp.Shutdown()
			return fmt.Errorf("nameservice: serving on %s: %w", addr, err)
		}
	}
	s.log.Info("serving DNS", "addr", pc.LocalAddr().String(), "zone", s.zone)
	if ready != nil {
		ready(pc.LocalAddr().String())
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = udp.ShutdownContext(sctx)
	_ = tcp.ShutdownContext(sctx)
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("nameservice: serving on %s: %w", addr, err)
}

// listen opens UDP and TCP on the same port; with port 0 it tries a few
// ports until one is free for both.
func listen(addr string) (net.PacketConn, net.Listener, error) {
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		lastErr = err
		if _, port, _ := net.SplitHostPort(addr); port != "0" {
			break
		}
	}
	return nil, nil, lastErr
}
