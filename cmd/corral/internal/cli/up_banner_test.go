package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestUpBannerSaysHowToReachTheCell(t *testing.T) {
	b := upBanner{cell: "dev", admin: "alice", machines: 3, agents: 3,
		grpc: "127.0.0.1:7070", http: "127.0.0.1:8080", dns: "127.0.0.1:5353", dnsWanted: "127.0.0.1:5353",
		agentAddrs: []string{"127.0.0.1:7071", "127.0.0.1:7072", "127.0.0.1:7073"}, portBase: 20000,
		store: "/home/alice/corral/corral-data/events.db", data: "/home/alice/corral/corral-data", defaultMasterAndDir: true}
	for _, haveDig := range []bool{true, false} {
		b.haveDig = haveDig
		var out bytes.Buffer
		b.write(&out)
		s := out.String()
		for _, want := range []string{
			"export CORRAL_MASTER=127.0.0.1:7070\n",
			// A terminal in another directory finds the credentials only so.
			"export CORRAL_DATA=/home/alice/corral/corral-data\n",
			"  machines    m1-m3, agents at 127.0.0.1:7071-7073 (the ports after the API's)\n",
			"  task ports  20000-22999 (--port-base; 1000 a machine)\n",
			"corral task get hello 0",
			"corral up --data /home/alice/corral/corral-data-2 --listen 127.0.0.1:7170 --http 127.0.0.1:8180 --dns 127.0.0.1:5453 --port-base 23000\n",
			"Ctrl-C stops the cell",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("dig on the path %v: the banner lacks %q:\n%s", haveDig, want, s)
			}
		}
		// dig is named as the way to ask only where it is.
		if startsWithDig := strings.Contains(s, "\n  dig @127.0.0.1 -p 5353 0.hello.alice.dev.corral"); startsWithDig != haveDig {
			t.Errorf("dig on the path %v, but the banner offers it as the command to type: %v:\n%s", haveDig, startsWithDig, s)
		}
	}
}

// corral up --help shows a second cell with the flags the banner names.
func TestUpHelpShowsASecondCell(t *testing.T) {
	long := strings.ReplaceAll((&app{}).upCommand().Long, "\\\n", "")
	m := regexp.MustCompile(`(?m)^\s*corral up (--data .*)$`).FindStringSubmatch(long)
	if m == nil {
		t.Fatalf("corral up --help shows no second cell:\n%s", long)
	}
	var flags []string
	for _, f := range strings.Fields(m[1]) {
		if strings.HasPrefix(f, "--") {
			flags = append(flags, f)
		}
	}
	b := upBanner{agents: 3, data: "/d", grpc: DefaultMaster, http: "127.0.0.1:8080", dns: "127.0.0.1:5353", portBase: 20000}
	want := secondCellArgs(t, b)
	for i, f := range flags {
		if i*2 >= len(want) || want[i*2] != f {
			t.Fatalf("corral up --help's second cell has the flags %v; the banner's is %v", flags, want)
		}
	}
	if len(flags)*2 != len(want) {
		t.Fatalf("corral up --help's second cell has the flags %v; the banner's is %v", flags, want)
	}
	// And the same ports as the banner says after a cell at the defaults.
	if got := strings.Join(strings.Fields(m[1])[2:], " "); got != strings.Join(want[2:], " ") {
		t.Errorf("corral up --help's second cell: %s; the banner's: %s", got, strings.Join(want[2:], " "))
	}
}

func TestMachinesLine(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		grpc  string
		want  string
	}{
		{[]string{"127.0.0.1:7071"}, "127.0.0.1:7070", "m1, agents at 127.0.0.1:7071 (the ports after the API's)"},
		{[]string{"127.0.0.1:7071", "127.0.0.1:7072"}, "127.0.0.1:9000", "m1-m2, agents at 127.0.0.1:7071-7072"},
		{[]string{"127.0.0.1:7071", "127.0.0.1:0", "127.0.0.1:7073"}, "127.0.0.1:7070", "m1-m3, agents at 127.0.0.1:7071, a free port, 127.0.0.1:7073"},
		{nil, "127.0.0.1:7070", "none"},
	} {
		t.Run(c.want, func(t *testing.T) {
			if got := machinesLine(c.addrs, c.grpc); got != c.want {
				t.Errorf("machinesLine(%v, %s) = %q, want %q", c.addrs, c.grpc, got, c.want)
			}
		})
	}
}

// cellPorts is every port a `corral up` with these flags takes: the API,
// the agents after it, the web UI, DNS and the task ports; an error when
// two of them are one port. The task ports are the range [lo, hi).
func cellPorts(args []string, agents int) (taken map[int]string, lo, hi int, err error) {
	c := (&app{}).upCommand()
	if err := c.ParseFlags(args); err != nil {
		return nil, 0, 0, err
	}
	taken = map[int]string{}
	take := func(p int, what string) error {
		if prev, ok := taken[p]; ok {
			return fmt.Errorf("port %d is both %s and %s", p, prev, what)
		}
		taken[p] = what
		return nil
	}
	port := func(flag string) int {
		_, p, _ := hostPort(c.Flags().Lookup(flag).Value.String())
		return p
	}
	listen := port("listen")
	if err := take(listen, "the API"); err != nil {
		return nil, 0, 0, err
	}
	for i := 1; i <= agents; i++ {
		if err := take(listen+i, "agent "+strconv.Itoa(i)); err != nil {
			return nil, 0, 0, err
		}
	}
	if err := take(port("http"), "the web UI"); err != nil {
		return nil, 0, 0, err
	}
	if err := take(port("dns"), "DNS"); err != nil {
		return nil, 0, 0, err
	}
	lo, _ = strconv.Atoi(c.Flags().Lookup("port-base").Value.String())
	hi = lo + agents*1000
	for p := range taken {
		if p >= lo && p < hi {
			return nil, 0, 0, fmt.Errorf("port %d is both %s and a task port", p, taken[p])
		}
	}
	return taken, lo, hi, nil
}

// The banner's second cell shares no port and no data dir with the cell
// that names it, for a family of first cells: addresses close together or
// far apart, any number of machines; and so does each cell of a chain of
// five from the defaults with every other.
func TestSecondCellTakesNoPortOfTheFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	tried := 0
	for n := range 400 {
		agents := 1 + r.IntN(8)
		spread := 300 // half the cases within a few hundred ports, where a plain shift lands on the first cell's
		if n%2 == 0 {
			spread = 20000
		}
		first := upBanner{agents: agents, data: "/tmp/c/corral-data",
			grpc: fmt.Sprintf("127.0.0.1:%d", 7000+r.IntN(spread)), http: fmt.Sprintf("127.0.0.1:%d", 7000+r.IntN(spread)),
			dns: fmt.Sprintf("127.0.0.1:%d", 7000+r.IntN(spread)), portBase: 28000 + 100*r.IntN(50)}
		args := []string{"--data", first.data, "--listen", first.grpc, "--http", first.http, "--dns", first.dns, "--port-base", strconv.Itoa(first.portBase)}
		if _, _, _, err := cellPorts(args, agents); err != nil {
			continue // a first cell at odds with itself: not a case
		}
		tried++
		checkApart(t, [][]string{args, secondCellArgs(t, first)}, agents)
	}
	if tried < 300 {
		t.Fatalf("%d first cells tried, want 300 or more", tried)
	}
	b := upBanner{agents: 3, data: "/home/alice/corral/corral-data", grpc: DefaultMaster, http: "127.0.0.1:8080", dns: "127.0.0.1:5353", portBase: 20000}
	chain := [][]string{{"--data", b.data, "--listen", b.grpc, "--http", b.http, "--dns", b.dns, "--port-base", "20000"}}
	for range 4 {
		next := secondCellArgs(t, b)
		chain = append(chain, next)
		b.data, b.grpc, b.http, b.dns = next[1], next[3], next[5], next[7]
		b.portBase, _ = strconv.Atoi(next[9])
	}
	checkApart(t, chain, 3)
}

// secondCellArgs is the banner's second cell's flags, after `corral up`.
func secondCellArgs(t *testing.T, b upBanner) []string {
	t.Helper()
	line := b.secondCell()
	args := strings.Fields(strings.TrimPrefix(line, "corral up "))
	if !strings.HasPrefix(line, "corral up ") || len(args) != 10 || args[0] != "--data" || args[8] != "--port-base" {
		t.Fatalf("after %+v the banner names the second cell %q", b, line)
	}
	return args
}

// checkApart fails unless no two of the cells share a port or a data dir.
func checkApart(t *testing.T, cells [][]string, agents int) {
	t.Helper()
	type cellTaken struct {
		ports  map[int]string
		lo, hi int
	}
	taken := make([]cellTaken, len(cells))
	for i, c := range cells {
		ports, lo, hi, err := cellPorts(c, agents)
		if err != nil {
			t.Fatalf("corral up %s: %v", strings.Join(c, " "), err)
		}
		taken[i] = cellTaken{ports, lo, hi}
	}
	for i := range cells {
		for j := range i {
			a, b := taken[i], taken[j]
			if a.lo < b.hi && b.lo < a.hi {
				t.Fatalf("cells %d and %d share task ports:\n%v", j+1, i+1, cells)
			}
			for p := range a.ports {
				if _, ok := b.ports[p]; ok || (p >= b.lo && p < b.hi) {
					t.Fatalf("port %d is cell %d's and cell %d's:\n%v", p, i+1, j+1, cells)
				}
			}
			for p := range b.ports {
				if p >= a.lo && p < a.hi {
					t.Fatalf("port %d is cell %d's and cell %d's:\n%v", p, j+1, i+1, cells)
				}
			}
			if cells[i][1] == cells[j][1] {
				t.Fatalf("cells %d and %d share the data dir %s", j+1, i+1, cells[i][1])
			}
		}
	}
}

func TestNextDataDir(t *testing.T) {
	for in, want := range map[string]string{
		"/a/corral-data": "/a/corral-data-2", "/a/corral-data-2": "/a/corral-data-3", "/a/cell-9": "/a/cell-10", "/a/x": "/a/x-2",
	} {
		if got := nextDataDir(in); got != want {
			t.Errorf("nextDataDir(%s) = %s, want %s", in, got, want)
		}
	}
}
