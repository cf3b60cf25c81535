package commands

import "fmt"

// CostsScope says whose costs a may read when it asks for user's ("": no
// one named) and answers the scope the read must keep: one user's name,
// or "" for every user's. A user reads their own costs, asked or by
// default, and nobody else's; an admin reads any one user's, or every
// user's by default.
//
// Bills, the costs page, the FOCUS export and the Infrastore's SQL all
// derive from every user's usage windows, so each asks this one rule:
// the API (Bill, ExportBill, Costs, Query), the web UI's costs page and
// SQL console through the API, and the CLI's bill and sql verbs through
// the API. A team is a label a job's owner sets, not an identity, so a
// label grants no one another user's costs: a user's costs by team are
// their own jobs' costs by team. The cell's idle capacity names no user
// and is shown with a user's own costs as the cell's aggregate.
func CostsScope(a Actor, user string) (string, error) {
	switch {
	case a.Admin:
		return user, nil
	case a.User == "":
		return "", fmt.Errorf("a caller without a name may read no one's costs: costs are their owner's")
	case user == "" || user == a.User:
		return a.User, nil
	}
	return "", fmt.Errorf("user: %s may read only their own costs, not %s's: other users' costs need the admin capability", a.User, user)
}

// MayQueryCell says whether a may run SQL over the Infrastore: admins
// only. Its tables hold every user's usage windows (task_usage, the
// events' payloads), from which anyone could price anyone's costs, and a
// query has no owner to scope by, so SQL keeps the rule for every user's
// costs (CostsScope with no user named, which only an admin may read).
func MayQueryCell(a Actor) error {
	if a.Admin {
		return nil
	}
	return fmt.Errorf("%s may not run SQL over the cell's history: its tables hold every user's usage and costs, and need the admin capability (read your own costs with corral bill)", callerName(a))
}
