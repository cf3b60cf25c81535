// Package feed delivers the committed events of a cell's log to in-process
// consumers (the Infrastore, live views, projection refreshers) through a
// watermill router with its middleware: correlation ids, retries, a poison
// queue and recovery from panics.
//
// Each consumer has its own topic and its own progress. A publisher per
// consumer tails the log from the consumer's durable position and publishes
// one message per committed batch, naming its position range; it publishes
// the next only when the consumer acknowledged the last (in order, at least
// once). The handler skips what the consumer already applied, so a batch
// delivered twice is applied once.
//
// Invariants:
//   - A consumer sees every committed event exactly once, in position order,
//     across handler failures, panics and restarts of the feed, provided its
//     Position is durable with what it applied (the Infrastore stores it in
//     the same transaction).
//   - A batch that still fails after the retries goes to the poison queue
//     and halts its consumer: nothing after it is applied (no event is
//     skipped). Poisoned lists it; restarting the feed retries from the
//     consumer's position.
package feed
