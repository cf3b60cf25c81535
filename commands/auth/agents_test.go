package auth_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/corralhq/corral/agent"
	"github.com/corralhq/corral/agent/agentpb"
	"github.com/corralhq/corral/commands/apipb"
	"github.com/corralhq/corral/commands/auth"
	"github.com/corralhq/corral/events"
	"github.com/corralhq/corral/internal/testkit"
)

// liveAgent is an agent.Run in this process, serving and registering with
// mutual TLS.
type liveAgent struct {
	name, addr, dir string
	logs            *testkit.SyncBuffer
}

func (c *cell) startAgent(t *testing.T, name string, cr *auth.Credentials) *liveAgent {
	t.Helper()
	la := &liveAgent{name: name, dir: t.TempDir(), logs: &testkit.SyncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.Config{
			Name: name, Masters: []string{c.addr}, ListenAddr: "127.0.0.1:0", DataDir: la.dir, Cgroups: "sampling",
			Capacity:       &events.Resources{CpuMilli: 2000, MemoryBytes: 2 << 30, DiskBytes: 10 << 30, Ports: 10},
			MemoryLowWater: -1, SampleInterval: 100 * time.Millisecond, DefaultGrace: time.Second, ReregisterAfter: time.Second,
			StopTasksOnExit:   true,
			ServerOptions:     auth.AgentServerOptions(cr, slog.New(slog.NewTextHandler(la.logs, nil))),
			MasterDialOptions: auth.AgentDialOptions(cr),
			Logger:            slog.New(slog.NewTextHandler(la.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			OnListen:          func(addr string) { addrc <- addr },
		})
	}()
	select {
	case la.addr = <-addrc:
	case err := <-done:
		t.Fatalf("agent %s: %v", name, err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent %s: %v", name, err)
		}
	})
	return la
}

func poll(cr *auth.Credentials, addr string, epoch int64) error {
	var opts []grpc.DialOption
	if cr != nil {
		opts = append(opts, cr.DialOption(auth.RoleAgent))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	cl, err := agent.Dial(addr, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cl.Poll(ctx, &agentpb.PollRequest{MasterId: "x", Epoch: epoch, Machine: "m1"})
	return err
}

// TestAgentsAndMastersProveWhoTheyAre: the agent registers over mutual TLS
// and is polled by the cell's master; no one else may poll it, and an
// agent of another cell (or with another machine's certificate) cannot
// register.
func TestAgentsAndMastersProveWhoTheyAre(t *testing.T) {
	c := newCell(t, cellOptions{scheduler: true, agents: []string{"m1", "m2"}})
	a := c.startAgent(t, "m1", c.local.Agents["m1"])
	admin := c.client(auth.ClientOptions{CAFile: c.local.CA, CertFile: c.local.AdminCert, KeyFile: c.local.AdminKey})
	waitFor(t, func() bool {
		st, err := admin.Status(bg, &apipb.StatusRequest{})
		return err == nil && st.Machines == 1
	}, "m1 registered over mutual TLS")

	other, err := auth.Init(filepath.Join(t.TempDir(), "other"), "other")
	if err != nil {
		t.Fatal(err)
	}
	alienMaster := mustIssue(t, other, auth.RoleMaster, "master")
	user := mustIssue(t, c.local.Cell, auth.RoleUser, "mallory")
	checkWhoMayPoll(t, c, a, alienMaster, user)
	checkWhoMayRegister(t, c, a, other, user)
}

// checkWhoMayPoll: only the cell's master may poll agent a.
func checkWhoMayPoll(t *testing.T, c *cell, a *liveAgent, alienMaster, user *auth.Credentials) {
	for _, tc := range []struct {
		name string
		cr   *auth.Credentials
		ok   bool
		says string
	}{
		{"the cell's master", c.local.Master, true, ""},
		{"plaintext", nil, false, ""},
		{"another cell's master", alienMaster, false, ""},
		{"a user of the cell", user, false, "needs the master role"},
		{"another agent of the cell", c.local.Agents["m2"], false, "needs the master role"},
	} {
		t.Run("poll by "+tc.name, func(t *testing.T) {
			err := poll(tc.cr, a.addr, c.m.Epoch())
			if (err == nil) != tc.ok || !strings.Contains(errString(err), tc.says) {
				t.Errorf("poll: %v; want ok=%v saying %q", err, tc.ok, tc.says)
			}
			if !tc.ok && code(err) != codes.Unavailable && code(err) != codes.PermissionDenied {
				t.Errorf("refused with %v", code(err))
			}
		})
	}

}

// checkWhoMayRegister: only an agent of the cell may register, and only its
// own machine; refusals append nothing, and agent a logged those it met.
func checkWhoMayRegister(t *testing.T, c *cell, a *liveAgent, other *auth.Cell, user *auth.Credentials) {
	alienAgent := mustIssue(t, other, auth.RoleAgent, "m3")
	before := c.head()
	for _, tc := range []struct {
		name    string
		cr      *auth.Credentials
		machine string
		says    string
	}{
		{"plaintext", nil, "m3", ""},
		{"an agent of another cell", alienAgent, "m3", ""},
		{"an agent naming another machine", c.local.Agents["m2"], "m1", "may register only the machine its certificate names"},
		{"a user", user, "mallory", "needs the agent role"},
	} {
		t.Run("register by "+tc.name, func(t *testing.T) {
			err := register(c, tc.cr, tc.machine)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("register: %v; want a refusal saying %q", err, tc.says)
			}
		})
	}
	if c.head() != before {
		t.Errorf("refused registrations appended %d events", c.head()-before)
	}
	// A master without the cell's certificate cannot command the agent:
	// the refusals above were logged by the agent, never obeyed.
	if logs := a.logs.String(); !strings.Contains(logs, "call refused") {
		t.Errorf("the agent logged no refusal:\n%s", logs)
	}
}

// mustIssue issues and loads credentials of cl for name in role.
func mustIssue(t *testing.T, cl *auth.Cell, role auth.Role, name string) *auth.Credentials {
	t.Helper()
	if _, _, err := cl.Issue(role, name); err != nil {
		t.Fatal(err)
	}
	cr, err := cl.Credentials(role, name)
	if err != nil {
		t.Fatal(err)
	}
	return cr
}

// register registers machine with the cell's master as the holder of cr,
// or in plaintext when cr is nil.
func register(c *cell, cr *auth.Credentials, machine string) error {
	var opts []grpc.DialOption
	if cr != nil {
		opts = auth.AgentDialOptions(cr)
	} else {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(c.addr, opts...)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = agentpb.NewMasterClient(conn).Register(ctx, &agentpb.MachineInfo{Name: machine, Address: "127.0.0.1:1",
		Capacity: &events.Resources{CpuMilli: 1000, MemoryBytes: 1 << 30}})
	return err
}
