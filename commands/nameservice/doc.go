// Package nameservice is corral's name service, after Borg's BNS: a DNS
// server that names every task by where it runs, read from the master's
// projection of the cell, so answers follow tasks as they move.
//
// Names, under the zone CELL.corral. (all lowercase; job and user names
// are DNS labels already):
//
//	INDEX.JOB.USER.CELL.corral.  A (or AAAA): the host of the task's machine
//	                             SRV: that host and the task's first port
//	JOB.USER.CELL.corral.        SRV: one record per running task
//	CELL.corral.                 SOA and NS of the zone
//
// SRV targets are task names (INDEX.JOB.USER.CELL.corral.), whose address
// records ride along in the additional section. A machine registered by host
// name rather than IP address gets a CNAME to that host instead of an A.
//
// Invariants:
//   - Only running tasks have records. A task that exists but does not run
//     (pending, scheduled, dead) answers NOERROR with no records, so caches
//     keep the name; a job, user or index that does not exist is NXDOMAIN.
//   - Every answer is read under the projection's read lock, in one View,
//     so a reply never mixes two states of the cell.
//   - Names outside the zone are REFUSED: this is not a recursive resolver.
//   - TTLs are short (5 s by default) because tasks move.
//   - UDP replies that do not fit are truncated with TC set; TCP carries the
//     rest.
package nameservice
