package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// placeholder is what a back-quoted word in a flag's usage may be: pflag,
// like Go's flag package, shows the first one as the flag's value name
// ("--prices FILE"), so it must read as one.
var placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// TestFlagValueNames walks every verb's flags, as `--help` shows them: a
// back-quoted word in a usage string is taken as the value's name, so
// "as `corral price set`" made help show "--prices corral price set". Each
// back-quoted name must be a placeholder such as FILE, and a flag that
// takes no value (a bool) must have none.
func TestFlagValueNames(t *testing.T) {
	a := &app{}
	root := a.rootCommand()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			seen++
			name, usage := pflag.UnquoteUsage(f)
			where := c.CommandPath() + " --" + f.Name
			if strings.Contains(usage, "`") {
				t.Errorf("%s: usage %q keeps a back quote after the value name", where, f.Usage)
			}
			if !strings.Contains(f.Usage, "`") {
				return
			}
			if f.NoOptDefVal != "" {
				t.Errorf("%s takes no value, but its usage names one (%q): help shows %q", where, name, "--"+f.Name+" "+name)
			} else if !placeholder.MatchString(name) {
				t.Errorf("%s: help shows the value name %q (from the first back-quoted word of %q); want a placeholder such as FILE, or no back quotes", where, name, f.Usage)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	// The walk reached the verbs: a rename that left it at the root would
	// check nothing.
	if seen < 150 {
		t.Fatalf("walked %d flags; want every verb's (more than 150)", seen)
	}
}
