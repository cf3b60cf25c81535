// Command kubepack packs a workload of ../shared/workloads with the real
// kube-scheduler, in process, on the very machine prefixes corral's
// compaction harness uses, so that the two schedulers' compaction figures
// can be set side by side.
//
// It runs kube-scheduler v1.36 (k8s.io/kubernetes/pkg/scheduler, unchanged:
// its queue, its plugins, its sampling of nodes, its preemption) against a
// fake API server held in memory (cluster.go): nodes and pods are listed
// once, binding and eviction are answered and fed back to the scheduler's
// informers as watch events, and every other call is answered by
// client-go's fake clientset. Nothing is written outside the process.
//
// It lives in a module of its own so that corral's module does not carry
// Kubernetes; it imports corral's workload package through a replace
// directive, so the machines, the tasks, the removal order (RemovalOrder)
// and the search for the smallest fitting prefix (SmallestFit) are corral's
// own, not copies.
//
// Invariants: kube-scheduler starts only once its queue holds every pod
// (all pending at once); a packing is counted only when it is quiet (no
// pod in its active queue, its backoff queue or in flight); a task counts
// as placed only if it was bound and never evicted afterwards.
package main
