// Package webui is the cell's web UI, after Borg's Sigma: a page for the
// cell, every job, task and machine, the live event log and a SQL console
// on the Infrastore. The master serves it at "/" of its HTTP port:
//
//	ui, err := webui.New(webui.Config{API: service, Cell: replica, Streams: store})
//	mux.Handle("/", ui)
//	server.RegisterOnShutdown(ui.Close) // ends the live event streams
//
// where service is the master's *api.Service (with Explain and
// Analytics set), replica its *master.Master and store its events.Store.
//
// # Pages
//
//   - / (cell): machines up, draining (with the tasks left) and down;
//     limit, reservation and usage of live work per priority band for CPU
//     and memory; pending tasks; the event rate over the latest events;
//     the machines, paged; and, while the leader's link holds machine loss
//     (Config.LossHold), a line saying so.
//   - /jobs: jobs filtered by user, label selector and state, with their
//     pending, running and dead task counts. A task that exited 0 at its
//     end, and a job that finished, are shown "finished" in a colour of
//     their own, not red "dead" like a killed one (states.go).
//   - /jobs/{user}/{job}: the resolved spec, the tasks (state, machine,
//     restarts, last exit, health), the why-pending explanation of each
//     pending class with its hints, a note when the job's tasks sit more
//     crowded than spreading by default wants (WhyPendingReply.Spread),
//     rolling update progress and the job's timeline: its events since
//     its submission, newest first (as Kubernetes and Nomad show events),
//     paged back with ?before=POSITION.
//   - /jobs/{user}/{job}/tasks/{index}: the task's whole history (where and
//     why it was scheduled, evictions with reason and preemptor, exits),
//     CPU and memory per usage window against limit and reservation, and
//     the tail of its logs when Config.Logs is set, then what it writes
//     live (/jobs/{user}/{job}/tasks/{index}/logs/{stdout|stderr}: server-
//     sent events of Config.Logs.FollowLogs, from the task's agent). Logs
//     are shown only to the task's owner and admins, the API's rule
//     (commands.MayReadLogs, asked through the master's Service), and
//     each read holds a slot under the API's caps on open streams. It
//     lists the task's earlier runs, each linking
//     /jobs/{user}/{job}/tasks/{index}/runs/{n}: that run's logs, read
//     from the machine where it ran, or why they are gone.
//   - /machines/{name}: attributes, allocs, tasks, and capacity against
//     limits, reservations and usage; while it drains, the tasks left and
//     the jobs whose disruption budgets hold them (commands.DrainHolds).
//   - /events: the log filtered by user, job, type and stream prefix, newest
//     first and paged back; new events arrive live as server-sent events
//     (/events/stream, through the API's Watch).
//   - /costs: a month's showback through the API's Costs: spend per day by
//     user, team label (?label=, default team) and band, idle capacity and
//     its share, corrections, the top jobs, all at one precision so the
//     parts shown add up to the total shown (money.go); and the month's FOCUS file
//     (POST /costs/focus with the page's CSRF token, streamed through the
//     API's ExportBill). Both keep commands.CostsScope for the viewer: a
//     user sees their own jobs' costs (no chart by user, the cell's idle
//     capacity apart from their total), an admin every user's. The SQL
//     console is for admins (commands.MayQueryCell).
//   - /diff?from=&to=: what changed between two points of the log (times
//     in UTC or positions; to defaults to now), through the API's
//     StateDiff, with links to the jobs, tasks and machines; the cell page
//     holds its form.
//   - /sim?run=1&from=&to=&remove=&add=&policy=: what if: a window of the
//     log replayed with a change (fauxmaster), recorded against simulated.
//     The replay runs where Config.Replay runs it (the binary: a child
//     process bounded in memory and time, killed when the viewer leaves,
//     capped per user and per cell), never in the page's process; each
//     field is read by fauxmaster.ParseChange, as corral sim reads its
//     flags, and a refusal names it.
//   - /sql: a console on the Infrastore through the API's Query (the
//     Infrastore's read-only guards apply), results as a table, and a CSV
//     download. GET shows the form (a link's ?q= fills it in) to those the
//     API lets query (commands.MayQueryCell; others get its 403); only a
//     POST carrying the page's CSRF token runs a query. A schema panel lists
//     every table, view and macro, opening to its columns, from the same
//     Query call's describe (sql_schema.go); a click on a name inserts it
//     into the query (static/sql.js; the panel works without it).
//
// # Choices
//
// Pages are rendered on the server with html/template; templates, the
// stylesheet and the two scripts are embedded in the binary. The UI works
// without JavaScript; the scripts only add what arrives live: rows to the
// events page (static/events.js), lines to a task's logs (static/logs.js).
//
// Charts are inline SVG drawn on the server (charts.go), not a vendored
// charting library: the charts needed (lines over time, bars against a
// capacity) are a few hundred lines of Go, need no script, no build step
// and no third-party licence, arrive with the page in one response, print,
// and can carry their numbers as an HTML table for screen readers.
//
// Reads go through the Cell API in-process (List, Get, ListTasks,
// WhyPending, Events, Watch, Query, Costs, ExportBill, StateDiff), so the pages show
// what `corral` shows. Cell.View is used only for what the API does not serve: sums per
// band, one task or machine, a rolling update's progress.
//
// # Invariants
//
//   - With Config.Login set (a master with --certs), every page but /login
//     asks for a session: a token the API would take, checked by Login,
//     starts one (an HttpOnly, SameSite=Strict cookie, 12 hours, in
//     memory); the pages' API calls carry its user. Config.Anonymous
//     (--web-anonymous) serves everyone as Config.User.
//   - A request whose Host is not an IP address, localhost or one of
//     Config.Hosts is refused (421 Misdirected Request): DNS rebinding
//     cannot make another site's page read the UI.
//   - Whatever costs the cell (a query) is a POST with a CSRF token that
//     matches the browser's SameSite=Strict cookie (csrf.go).
//   - The UI only reads: it appends nothing to the log. Every user sees
//     every job, as in Borg, where debugging information is shown to all.
//   - Nothing is fetched from elsewhere at run time (a Content-Security-
//     Policy of 'self' says so to the browser).
//   - Every table is a <table> with <th scope>, every form control has a
//     <label>, every page works with the keyboard (a skip link, visible
//     focus), and tables of unbounded size are paged.
//   - A read is refused on a page exactly when the API refuses it to the
//     same viewer: both ask the one rule in commands. The pages and
//     endpoints are the list routes returns, which TestEveryReadAnswers-
//     AlikeOnEverySurface walks as a job's owner, another user, an admin
//     (by the master's Admins list and by role) and anonymous beside the RPC that reads the same, with every
//     method of the Cell service.
//   - Bad input is answered with 400 and an error naming the parameter and
//     the reason; the API's errors keep their message and map to the HTTP
//     status of their gRPC code.
//   - A page is rendered into a buffer before it is sent, so a failure
//     shows an error page, never half a page.
package webui
