// Package workload measures the scheduler: cells read from CSV files
// (LoadWorkload, the neutral workloads and the traces under ../shared), the
// public Google trace's cell (LoadGoogleTrace: its running tasks on the
// published machine mix, GoogleMachines), a synthetic cell generator
// (Synthetic), a family of generated cells that span the corners a
// packing policy must hold on (Family: machine mix, binding resource,
// task sizes, fill, priority bands; a member is one line of the table,
// CellSpec.Cell generates it; "family:<member>" names one where a
// workload folder is expected), the lower bound of machines a workload needs (LowerBound),
// Borg's cell compaction (Compact, §5.1) and the shape of the paper's §5
// experiments (BorgExperiments: policies, prod and non-prod segregated,
// requests in power-of-two buckets), with the benchmarks and the reports
// the README quotes. It is not in the binary: the scheduler package stays
// the pure pass.
//
// Invariants: LoadWorkload and LoadGoogleTrace are the only functions that
// touch the file system; Synthetic, CellSpec.Cell, GoogleMachines, Sample,
// Compact and BorgExperiments are deterministic in their seeds.
package workload
