package commands

import "fmt"

// MayReadLogs says whether a may read the logs of a task owned by owner:
// the owner and admins may, nobody else. Logs hold what a task prints,
// which its spec and events do not (tokens, customer data), so the
// read-everything rule of jobs and events does not extend to them. The
// API's TaskLogs and the web UI's task page both ask this one function.
func MayReadLogs(a Actor, owner string) error {
	if a.Admin || (a.User != "" && a.User == owner) {
		return nil
	}
	return fmt.Errorf("%s may read only their own tasks' logs, not %s's: that needs the admin capability", callerName(a), owner)
}

// MayReadMetrics says whether a may read the master's /metrics: admins
// only. Its series name users and jobs (usage, restarts, pending tasks by
// owner), which a scrape must not hand to anyone who reaches the port;
// Prometheus scrapes with an admin's bearer token. Every surface serving
// the cell's metrics asks this one function.
func MayReadMetrics(a Actor) error {
	if a.Admin {
		return nil
	}
	return fmt.Errorf("%s may not read the cell's metrics: they name users and jobs, and need the admin capability (scrape with an admin's token: corral token issue --role admin NAME)", callerName(a))
}
