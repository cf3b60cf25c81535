package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// agentProcessEnv, when set, makes the test binary run an agent instead of
// the tests: the agent-restart test starts, kills and restarts a real agent
// process this way.
const agentProcessEnv = "CORRAL_AGENT_TEST_PROCESS"

type agentProcessConfig struct {
	Name, DataDir, CgroupParent, Cgroups string
	SampleMs                             int
	StopTasksOnExit                      bool
	GraceMs                              int
}

func TestMain(m *testing.M) {
	if raw := os.Getenv(agentProcessEnv); raw != "" {
		os.Exit(runAgentProcess(raw))
	}
	os.Exit(m.Run())
}

func runAgentProcess(raw string) int {
	var pc agentProcessConfig
	if err := json.Unmarshal([]byte(raw), &pc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Run(ctx, Config{
		Name:            pc.Name,
		DataDir:         pc.DataDir,
		ListenAddr:      "127.0.0.1:0",
		Cgroups:         pc.Cgroups,
		CgroupParent:    pc.CgroupParent,
		SampleInterval:  msDuration(pc.SampleMs),
		MemoryLowWater:  -1,
		StopTasksOnExit: pc.StopTasksOnExit,
		DefaultGrace:    msDuration(pc.GraceMs),
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnListen:        func(addr string) { fmt.Println("LISTEN", addr) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
