// Package workload measures the scheduler: cells read from CSV files
// (LoadWorkload, the neutral workloads and the traces under ../shared), a
// synthetic cell generator (Synthetic), the lower bound of machines a
// workload needs (LowerBound) and Borg's cell compaction (Compact, §5.1),
// with the benchmarks and the compaction report the README quotes. It is
// not in the binary: the scheduler package stays the pure pass.
//
// Invariants: LoadWorkload is the only function that touches the file
// system; Synthetic and Compact are deterministic in their seeds.
package workload
