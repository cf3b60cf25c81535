package commands_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/commands"
)

func TestCostsScope(t *testing.T) {
	for i, c := range []struct {
		actor commands.Actor
		asked string
		scope string
		ok    bool
	}{
		{commands.Actor{User: "alice"}, "", "alice", true},      // by default, one's own
		{commands.Actor{User: "alice"}, "alice", "alice", true}, // asked by name
		{commands.Actor{User: "alice"}, "bob", "", false},       // another's: refused
		{commands.Actor{User: "root", Admin: true}, "", "", true},
		{commands.Actor{User: "root", Admin: true}, "bob", "bob", true},
		{commands.Actor{}, "", "", false},
		{commands.Actor{}, "bob", "", false},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			scope, err := commands.CostsScope(c.actor, c.asked)
			if (err == nil) != c.ok || scope != c.scope {
				t.Errorf("CostsScope(%+v, %q) = %q, %v; want %q, allowed %v", c.actor, c.asked, scope, err, c.scope, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "costs") {
				t.Errorf("refusal %q does not say the rule", err)
			}
		})
	}
}

func TestMayQueryCell(t *testing.T) {
	testAdminOnly(t, "MayQueryCell", commands.MayQueryCell)
}

// testAdminOnly checks a rule that admits admins only, and says so when
// it refuses.
func testAdminOnly(t *testing.T, name string, rule func(commands.Actor) error) {
	for i, c := range []struct {
		actor commands.Actor
		ok    bool
	}{
		{commands.Actor{User: "root", Admin: true}, true},
		{commands.Actor{User: "alice"}, false},
		{commands.Actor{}, false},
	} {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			err := rule(c.actor)
			if (err == nil) != c.ok {
				t.Errorf("%s(%+v) = %v, want allowed %v", name, c.actor, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "admin capability") {
				t.Errorf("refusal %q does not say the rule", err)
			}
		})
	}
}
