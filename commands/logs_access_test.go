package commands_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands"
)

func TestMayReadLogs(t *testing.T) {
	for i, c := range []struct {
		actor commands.Actor
		owner string
		ok    bool
	}{
		{commands.Actor{User: "alice"}, "alice", true},
		{commands.Actor{User: "bob"}, "alice", false},
		{commands.Actor{User: "root", Admin: true}, "alice", true},
		{commands.Actor{}, "", false}, // no name is nobody's owner
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			err := commands.MayReadLogs(c.actor, c.owner)
			if (err == nil) != c.ok {
				t.Errorf("MayReadLogs(%+v, %q) = %v, want allowed %v", c.actor, c.owner, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "only their own tasks' logs") {
				t.Errorf("refusal %q does not say the rule", err)
			}
		})
	}
}

func TestMayReadMetrics(t *testing.T) {
	testAdminOnly(t, "MayReadMetrics", commands.MayReadMetrics)
}
