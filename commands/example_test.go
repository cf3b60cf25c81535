package commands_test

import (
	"fmt"
	"time"

	"github.com/corralhq/corral/commands"
	"github.com/corralhq/corral/projections"
)

// The master's loop: decide against the projection, append (here: skipped),
// apply. A refusal changes nothing and says why.
func ExampleDecide() {
	s := projections.New()
	clock := commands.FixedClock(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	admin := commands.Meta{Actor: commands.Actor{User: "root", Admin: true}, RequestID: "req-1"}
	alice := commands.Meta{Actor: commands.Actor{User: "alice"}, RequestID: "req-2"}
	run := func(cmd commands.Command) {
		evs, err := commands.Decide(s, cmd, clock)
		if err != nil {
			fmt.Printf("refused (%v): %v\n", commands.CodeOf(err), err)
			return
		}
		for _, e := range evs {
			projections.Apply(s, e) // after the store appended them
			fmt.Println(e.Type, e.Stream)
		}
	}
	run(commands.RegisterMachine{Meta: admin, Machine: "m1", Address: "10.0.0.1:7000",
		Capacity: projections.Resources{CPUMilli: 8000, MemoryBytes: 32 << 30, Ports: 100}})

	spec, err := commands.DecodeSpecJSON([]byte(`{
  "name": "web", "priority": "production", "count": 2, "command": "/bin/server",
  "resources": {"cpu": "500m", "memory": "1GiB"}
}`), "alice")
	if err != nil {
		panic(err)
	}
	run(commands.SubmitJob{Meta: alice, Spec: spec})
	run(commands.SetQuota{Meta: admin, User: "alice", Band: "production", Resources: projections.Resources{CPUMilli: 2000, MemoryBytes: 4 << 30}})
	run(commands.SubmitJob{Meta: alice, Spec: spec})
	fmt.Println("pending:", s.PendingCount())
	// Output:
	// MachineRegistered machine/m1
	// refused (ResourceExhausted): resources: over quota: alice asks for [cpu 1000m, memory 2GiB, disk 0, ports 0] in band production; granted [cpu 0m, memory 0, disk 0, ports 0]; in use [cpu 0m, memory 0, disk 0, ports 0]; short in [cpu memory]. Ask for less, use a lower band, or ask an admin for more production quota
	// QuotaSet quota/alice
	// JobSubmitted job/alice/web
	// TaskSubmitted task/alice/web/0
	// TaskSubmitted task/alice/web/1
	// pending: 2
}

func ExampleDecodeSpecJSON_errors() {
	_, err := commands.DecodeSpecJSON([]byte(`{
  "name": "web", "count": 4, "command": "/bin/server",
  "resources": {"cpu": 0, "memory": "1GiB"},
  "tasks": {"3": {"resources": {"cpu": 1, "memory": 0}}}
}`), "alice")
	fmt.Println(err)
	// Output:
	// resources.cpu: must be > 0; tasks[3].resources.memory: must be > 0
}
