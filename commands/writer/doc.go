// Package writer decides what the leading master's writer appends to the
// log and what it answers, in the style of etcd's raft: this package
// decides, the caller does the I/O. The master (commands/master) and the
// deterministic simulation both drive it, so the simulation exercises the
// rules the binary runs.
//
// One group commit is two calls around one append:
//
//   - Plan decides a batch of queued commands against the state, applying
//     each command's events to it speculatively so that the next command
//     sees them, and says which commands are answered at once (refused,
//     changing nothing, or a retry of a request already answered), which
//     wait for the next batch (a retry queued behind its own first attempt)
//     and which append requests to send in one AppendMany;
//   - Finish takes the append's answer and says what to reply to each
//     command, what to remember of each request id, and whether the state
//     must be loaded again from the log (any failure: the speculative
//     applies are undone), the master was deposed (the store fenced its
//     epoch) or the batch must be redone one command at a time (it held a
//     retry the cache no longer knew).
//
// Invariants: a command is decided against a state that holds every
// command before it in the log and nothing else once the caller reloads on
// Finish's word; a request id is appended at most once (the store's
// idempotency keys back the Recent cache); every command of a batch gets
// exactly one answer, from Plan or from Finish, or is handed back (Later,
// Retry) to be decided again.
package writer
