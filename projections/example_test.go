package projections_test

import (
	"fmt"

	"github.com/corralhq/corral/projections"
)

func ExampleParseSelector() {
	sel, err := projections.ParseSelector("team=web,tier!=canary,env in (prod,staging),!legacy")
	if err != nil {
		panic(err)
	}
	fmt.Println(sel.Matches(map[string]string{"team": "web", "tier": "frontend", "env": "prod"}))
	fmt.Println(sel.Matches(map[string]string{"team": "web", "tier": "canary", "env": "prod"}))
	// Output:
	// true
	// false
}
