package cli

import (
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// upBanner is what `corral up` says once its cell is up: where each part
// listens, where its files are, and what to type next, in this terminal's
// words (the addresses and directory it really got).
type upBanner struct {
	cell, admin         string
	machines, agents    int
	grpc, http, dns     string // what the master listens on; "" when off
	dnsWanted           string // --dns, named when DNS is off
	agentAddrs          []string
	portBase            int
	store, data         string // data is absolute
	ca, cert, key, tok  string
	webAnonymous        bool
	haveDig             bool // dig is on $PATH
	defaultMasterAndDir bool // the client's defaults reach this cell (7070 and ./corral-data)
}

func (b upBanner) write(w io.Writer) {
	fmt.Fprintf(w, "corral cell %q is up: %d of %d machines registered\n\n", b.cell, b.machines, b.agents)
	fmt.Fprintf(w, "  gRPC API    %s\n", b.grpc)
	if b.http != "" {
		fmt.Fprintf(w, "  web         http://%s/\n", b.http)
	}
	if b.dns != "" {
		fmt.Fprintf(w, "  DNS         %s   (names like 0.hello.%s.%s.corral)\n", b.dns, b.admin, b.cell)
	} else {
		fmt.Fprintf(w, "  DNS         off: %s is taken (give --dns ADDR)\n", b.dnsWanted)
	}
	fmt.Fprintf(w, "  machines    %s\n", machinesLine(b.agentAddrs, b.grpc))
	fmt.Fprintf(w, "  task ports  %d-%d (--port-base; 1000 a machine)\n", b.portBase, b.portBase+b.agents*1000-1)
	fmt.Fprintf(w, "  event log   %s\n", redactURL(b.store))
	fmt.Fprintf(w, "  Infrastore  %s\n", filepath.Join(b.data, "infrastore.duckdb"))
	fmt.Fprintf(w, "  logs        %s\n", filepath.Join(b.data, "corral.log"))
	fmt.Fprintf(w, "  admin       %s\n", b.admin)
	fmt.Fprintf(w, "  CA          %s\n", b.ca)
	fmt.Fprintf(w, "  admin cert  %s (key %s)\n", b.cert, b.key)
	fmt.Fprintf(w, "  admin token %s\n\n", b.tok)
	fmt.Fprintf(w, "The API and every master-agent connection are TLS; the corral command finds your certificate under the data dir.\n")
	if b.webAnonymous {
		fmt.Fprintf(w, "The web UI is plain HTTP on loopback, readable without a login by anyone who can reach it (--web-anonymous).\n\n")
	} else {
		fmt.Fprintf(w, "The web UI is plain HTTP on loopback; log in with the admin token (the file above) or one from `corral token issue`.\n\n")
	}
	// The client finds a cell by its master's address and its data dir
	// (for the credentials): both are said, so a terminal in another
	// directory, or one meant for a second cell, reaches this one.
	where := "the corral command finds this cell by these two"
	if b.defaultMasterAndDir {
		where += "; from this directory they are its defaults"
	}
	fmt.Fprintf(w, "Next, in another terminal (%s):\n", where)
	fmt.Fprintf(w, "  export CORRAL_MASTER=%s\n", b.grpc)
	fmt.Fprintf(w, "  export CORRAL_DATA=%s\n", b.data)
	fmt.Fprintf(w, `  corral job submit examples/hello.jsonnet --wait
  corral task list hello
  corral job submit examples/unschedulable.jsonnet
  corral why unschedulable
  corral events --job hello
  corral sql "SELECT type, count(*) AS n FROM task_events GROUP BY type ORDER BY type"
  corral bill
  corral state --at 5m
`)
	if host, port, err := net.SplitHostPort(b.dns); err == nil {
		lookup := fmt.Sprintf("dig @%s -p %s 0.hello.%s.%s.corral", host, port, b.admin, b.cell)
		if b.haveDig {
			fmt.Fprintf(w, "  %s   (or: corral task get hello 0)\n", lookup)
		} else {
			fmt.Fprintf(w, "  corral task get hello 0   (its DNS name and address; no dig here for: %s)\n", lookup)
		}
	}
	if next := b.secondCell(); next != "" {
		fmt.Fprintf(w, "\nA second cell beside this one needs its own data dir, addresses and task ports:\n  %s\n", next)
	}
	fmt.Fprintf(w, "\nCtrl-C stops the cell and its tasks; `corral up` again resumes it.\n")
}

// machinesLine names the agents' addresses: the ports after the API's
// when they were free, as a range.
func machinesLine(addrs []string, grpc string) string {
	n := len(addrs)
	if n == 0 {
		return "none"
	}
	names := "m1"
	if n > 1 {
		names = "m1-m" + strconv.Itoa(n)
	}
	host, first, err := hostPort(addrs[0])
	consecutive := err == nil && first != 0
	for i, a := range addrs {
		h, p, err := hostPort(a)
		consecutive = consecutive && err == nil && h == host && p == first+i
	}
	if consecutive {
		r := addrs[0]
		if n > 1 {
			r += "-" + strconv.Itoa(first+n-1)
		}
		if _, g, err := hostPort(grpc); err == nil && g+1 == first {
			return fmt.Sprintf("%s, agents at %s (the ports after the API's)", names, r)
		}
		return fmt.Sprintf("%s, agents at %s", names, r)
	}
	shown := make([]string, n)
	for i, a := range addrs {
		if _, p, err := hostPort(a); err == nil && p == 0 {
			a = "a free port"
		}
		shown[i] = a
	}
	return fmt.Sprintf("%s, agents at %s", names, strings.Join(shown, ", "))
}

func hostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	return h, n, err
}

// secondCell is a `corral up` for a cell beside this one: another data
// dir, each address a hundred ports on (or a few hundred, past this cell's
// own), the agents' ports after the API's, and the task ports after this
// cell's. "" when a port would leave the range.
func (b upBanner) secondCell() string {
	dnsAddr := b.dns
	if dnsAddr == "" {
		dnsAddr = b.dnsWanted
	}
	listen, errL := addrPort(b.grpc)
	http, errH := addrPort(b.http)
	dns, errD := addrPort(dnsAddr)
	if errL != nil || errH != nil || errD != nil {
		return ""
	}
	own := map[int]bool{http.p: true, dns.p: true}
	for i := 0; i <= b.agents; i++ {
		own[listen.p+i] = true
	}
	for shift := 100; shift <= 1000; shift += 100 {
		next := map[int]bool{http.p + shift: true, dns.p + shift: true}
		for i := 0; i <= b.agents; i++ {
			next[listen.p+shift+i] = true
		}
		clash := len(next) < b.agents+3 || listen.p+shift+b.agents > 65535 || http.p+shift > 65535 || dns.p+shift > 65535
		for p := range next {
			clash = clash || own[p]
		}
		base := b.portBase + b.agents*1000
		if clash || base+b.agents*1000 > 65536 {
			continue
		}
		return fmt.Sprintf("corral up --data %s --listen %s --http %s --dns %s --port-base %d",
			nextDataDir(b.data), listen.plus(shift), http.plus(shift), dns.plus(shift), base)
	}
	return ""
}

// hostAndPort is an address taken apart.
type hostAndPort struct {
	host string
	p    int
}

func addrPort(addr string) (hostAndPort, error) {
	h, p, err := hostPort(addr)
	if err == nil && p == 0 {
		err = fmt.Errorf("%s: no fixed port", addr)
	}
	return hostAndPort{h, p}, err
}

func (a hostAndPort) plus(n int) string { return net.JoinHostPort(a.host, strconv.Itoa(a.p+n)) }

var numbered = regexp.MustCompile(`^(.*)-(\d+)$`)

// nextDataDir is dir with its number raised: corral-data-2 after
// corral-data, corral-data-3 after corral-data-2.
func nextDataDir(dir string) string {
	if m := numbered.FindStringSubmatch(dir); m != nil {
		if n, err := strconv.Atoi(m[2]); err == nil {
			return m[1] + "-" + strconv.Itoa(n+1)
		}
	}
	return dir + "-2"
}
