// Package scheduler is corral's scheduler: Borg's scheduling pass (§3.2,
// §3.4 of the paper) over a read-only view of the cell, plus the helpers
// around it (reservation estimates, the fit rule and constraint matcher
// PlaceTasks shares, a rate limit for rescheduling from lost machines).
// The tools that measure it (a workload reader, a synthetic cell
// generator, cell compaction) are in scheduler/workload.
//
// # What it owns
//
//   - The input types (Cell, Machine, PlacedTask, PlacedAlloc, PendingTask,
//     PendingAlloc, Constraint, Resources): an adapter builds them from the
//     projection. A Machine's Version must change whenever anything on it
//     changes.
//   - The pass: Schedule(cell, config, seed) -> *Plan.
//   - The output: Plan (AllocPlacements and Placements, convertible to
//     AllocScheduled, TaskScheduled and TaskEvicted events) and one
//     Explanation per class left pending, the data behind "why pending?".
//
// # The pass, step by step
//
//  1. Queue: pending tasks and allocs from high to low priority; within a
//     priority allocs first (tasks may go into them), then tasks; each
//     round-robin between users, users taking turns in the order of their
//     oldest item. Each user's items go largest first (first-fit
//     decreasing), size being the share of the cell asked for in each
//     resource weighted by how much of that resource the workload asks
//     for; items of one size in submission order.
//  2. Equivalence classes: tasks with identical priority, resources,
//     constraints, alloc set, package and crash history form a class (the
//     job does not matter). Feasibility and scores are computed per class
//     and machine, never per task.
//  3. Relaxed randomization: machines are examined in a random order seeded
//     by the caller; each class starts at its own offset and keeps a pool of
//     the first K feasible machines it finds, topping it up as machines fill.
//     A class asking for a resource the whole workload (placed and pending)
//     asks for 90% or more of keeps eight times as many: there a sample's
//     best strands what the cell's best would not. Under hybrid, a class
//     that asks for none of such a scarce resource counts a machine that
//     would keep some of it free as an eighth of a machine, and pays for
//     it in its score: CPU work stays off the GPU machines while there is
//     room elsewhere.
//  4. Feasibility, cheapest check first: machine up and not draining; the
//     task did not crash there recently; hard constraints (=, !=, <, >, in,
//     exists); room inside the alloc for tasks of an alloc set; otherwise
//     room on the machine, where a prod task (priority >= 9) counts the
//     limits of the tasks already there and a non-prod task their
//     reservations, and where room held by tasks the task may preempt counts
//     as free; ports. The first failing check is the machine's rejection
//     reason.
//  5. Scoring: the policy's fit (worst-fit, best-fit or hybrid) plus soft
//     constraints, the package already on the machine, a mix of prod and
//     non-prod, minus the cost of preemption (one unit per victim plus its
//     priority share) and minus a share for the job's tasks already on the
//     machine, its rack and its power domain, and, unless the job packs
//     (PendingTask.Pack), Weights.OverCap where the machine or one of its
//     failure domains already holds SpreadCap of the job's tasks
//     (spreading by default, spread.go). A job that names spread
//     attributes (PendingTask.Spread) takes, among every feasible machine
//     (its class's pool is filled from all of them), one whose values hold
//     the fewest of its tasks, the first attribute first, then the best
//     score; DistinctHosts is a feasibility check (a machine already
//     holding a task of the job is rejected, ReasonDistinctHosts). Classes
//     of such jobs hold one job each.
//  6. Score caching: a pool entry keeps its score until the machine changes
//     in this pass (each machine carries a change counter) or the hybrid
//     policy's picture of pending demand changes; only stale entries are
//     re-evaluated.
//  7. Placement: the best pool entry wins (ties: earliest in the random
//     order). If the machine lacks room, the lowest-priority preemptible
//     tasks are evicted, larger first within a priority, and victims the
//     others make unnecessary are spared. Prod never preempts prod; allocs
//     neither preempt nor are preempted. Evicted tasks are reported in the
//     placement; they go back to pending through their TaskEvicted event,
//     not within this pass. MachinesExamined counts the machines looked at
//     for the decision: the pool and those rejected while topping it up.
//  8. Rerun: a class rejected by a machine that had room for it before
//     this pass's first change to that machine is contested. If a
//     contested class keeps tasks pending, the pass runs once more from
//     the same input and seed with the contested classes at the front of
//     the queue, and keeps the plan that leaves fewer tasks pending at the
//     highest priority where the two differ (the first on a tie): a higher
//     priority never loses a placement to a promoted task. What the rerun
//     places at the cost of lower priorities, preemption would have taken
//     from them once they ran (reorder.go). If the kept plan still leaves
//     a near miss (contested tasks pending, at most one in 64 of the
//     queue) and the pass sampled (K below the machines), it runs up to
//     twice more in its own order with new samples (seeds derived from
//     the pass's), each kept by the same rule. If the default (hybrid)
//     still leaves a close miss (contested tasks pending, at most one in
//     16 of the queue), it runs under worst-fit's rule and then
//     best-fit's, each as a cell configured with it would (its first run,
//     and its rerun with its own contested classes first), each kept by
//     the same rule (portfolio.go). If contested tasks are still pending
//     and seeing every machine costs at most twice the first run (classes
//     times machines against its checks), it runs once more with every
//     machine in view, kept by the same rule.
//  9. Relocation: for a task still left pending, a machine where moving
//     at most three of this pass's placements elsewhere would make room
//     (each to the best machine of its class's pool, or, one level down,
//     to a machine where room is made for it in turn), and the task is
//     placed there. Moved placements go to the end of the plan; no
//     placement is lost, none preempts, and relocation spends at most the
//     checks the pass spent (relocate.go).
//  10. Packing instead: if spreading by default took a machine other than
//     the one the score alone chose and tasks are left pending, steps 1-9
//     run again with every job packing, and that plan is kept unless the
//     spreading one leaves no more pending at every priority
//     (Stats.Packed, spread.go).
//  11. Explanations: every class left with pending tasks is checked against
//     every machine once more (a scheduler that remembers machines reuses
//     an earlier pass's verdict on a machine that has not changed,
//     explainmemo.go); rejections are counted per reason and hints say
//     what would make it fit.
//
// # Invariants
//
//   - The pass is pure: no I/O, no clock, no global random source, no
//     goroutines. The same Cell, Config and seed give the same Plan.
//   - The pass never writes to its input; a Cell may be shared by passes.
//   - A class that has examined every machine and holds no feasible one
//     is not examined again in the pass. Placements only take room, but an
//     eviction can free more than its preemptor takes (a large victim for
//     a small task), and an alloc placed in the pass opens room for its
//     set's tasks: those wait for the next pass, which sees the committed
//     cell.
//   - Placements are proposals: several on one machine share its
//     MachineVersion, and the command handler re-checks them against the
//     current state and refuses stale ones, which the next pass reconsiders.
//   - Priorities outside 0-11 are clamped by the pass and refused by
//     Cell.Validate.
//   - A pass runs at most nine times (step 8: the first run, the rerun,
//     two new samples, two runs under each of the two other rules, the
//     whole view; Stats.Reruns at most 8, held by
//     TestExtraRunsKeepOnlyAFullerPlan), and runs again only when a task
//     that had room at the start of the pass was left pending; the packing
//     run of step 10 repeats that, only when spreading by default moved a
//     task and tasks were left pending.
//   - Spreading by default never leaves more tasks pending at any
//     priority than packing every job would.
//   - Relocation only adds placements: every task the pass placed stays
//     placed, and the plan applies in its order.
//
// # How the default fit follows from the cell
//
// The hybrid policy (the default) scores a placement by best fit's
// tightness minus the rise in stranded room it causes, in units of the
// cell's machines with each resource weighed by how much of it the
// workload asks for. What counts as stranded, and how much tightness
// counts, both follow from the cell and the pending work the pass sees,
// not from constants tuned to a workload:
//
//   - Room is stranded for a pending shape that no longer fits in it (all
//     of the room, for that shape's share of the queue). This is the
//     fragmentation measure of Weng et al. (ATC '23), used for the
//     large and GPU shapes of OpenB's cell.
//   - For the shapes that do fit, room is stranded as far as it is out of
//     proportion with the mix of the small pending work (classes that ask
//     for at most 1/16 of the mean machine in every resource): as much of
//     the mix as fits takes its share of each resource, and the rest is
//     lost however small the tasks are. It is the same measure in the
//     limit of small tasks, where the shapes alone see nothing until the
//     end: a machine whose memory fills before its CPU strands the CPU no
//     task will use (Borg §5: stranding is what packing loses). It is
//     weighed by the small classes' share of the queue.
//   - Tightness (best fit) keeps large room whole for large work (Borg
//     §3.2's "best fit", §5.1's compaction); it is weighed by the share of
//     the queue that is not small. Where nearly all the work is small,
//     there is no large room to keep, and packing tightly only piles each
//     shape onto the fullest machines: on a cell of ten machine kinds
//     with CPU and memory both 98% asked for by small tasks (the workload
//     package's bal-many-small-98), hybrid with full tightness and no mix
//     term needed 175 machines where worst-fit needed 158; with both, 160.
//
// On synthetic-10k's largest machines, where a fifth of the tasks are
// tiny, the same change took compaction from 1.029 of the bound to 1.002.
//
// So on a cell of small work the default balances each machine against
// the work's mix, as worst-fit's convex cost does by other means, and on
// a cell of large or GPU work it packs tightly and keeps the shapes' room
// whole, as before.
//
// One scoring rule still cannot be the best on every cell, and which rule
// wins follows from the cell in ways the pass cannot read off its queue
// beforehand: with one machine kind and tasks of a quarter of a machine
// (cpu-one-large-80) best fit's whole machines needed 165 where hybrid
// needed 168, and the mix term alone left bal-many-small-98 at 160 where
// worst-fit needed 158. What the pass can read is its own outcome. A
// close miss (contested tasks pending, at most one in 16 of the queue) is
// where another rule can matter, so there the default runs under
// worst-fit's and best-fit's rules too, with the same seed and sample,
// and keeps the plan that leaves fewer pending from the highest priority
// down (step 8, portfolio.go): at a size where one of them places the
// queue, the default does too, and a pass that placed everything or
// missed by far pays nothing. The plans are compared on their outcome, so
// the default may combine them across sizes and do better than any one
// rule (bal-one-mixed-85: 146 machines, against 151 for hybrid alone and
// 152-154 for the others). The README's compaction table has the figures
// for every member of the workload package's family of generated cells.
//
// Scores are cached within a pass only. Across passes the hybrid policy's
// demand picture (the shapes of the pending queue, the cell's scarcity)
// changes with the queue, so a score from an earlier pass would be stale;
// and a feasibility check costs about as much as a cache lookup would.
// Verdicts of "infeasible" are kept across passes by a scheduler that
// remembers machines (RememberMachines; infeasible.go), for classes left
// with pending tasks: a class skips a
// machine an earlier pass rejected for it, as long as the machine is the
// same input Machine and untouched in this pass. A cell whose leftover
// work fits nowhere then pays per pass for the machines that changed, not
// for every machine. The plan is the one a fresh scheduler makes; only
// Stats differ.
//
// # Files
//
// Nothing here touches the file system: the reservation estimate and the
// rate limiter are pure like the pass.
package scheduler
