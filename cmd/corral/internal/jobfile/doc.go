// Package jobfile reads the job files a user hands to `corral job submit`,
// `update` and `render`: Jsonnet (.jsonnet, .libsonnet), YAML (.yaml, .yml)
// or JSON (.json), chosen by the file's extension.
//
// A file holds one job spec (the format commands.DecodeSpecJSON reads), or a
// bundle:
//
//	{
//	  alloc_sets: [ { name: 'web', count: 1, resources: { cpu: 1, memory: '512MiB' } } ],
//	  jobs: [ { name: 'server', alloc_set: 'web', ... }, { name: 'logsaver', alloc_set: 'web', ... } ],
//	}
//
// A bundle's alloc sets are created before its jobs are submitted, so jobs
// that run inside them find them.
//
// Invariants:
//   - Jsonnet runs with a time limit (Options.Timeout) and a bounded stack
//     (Options.MaxStack); its output is bounded like any spec file.
//   - Every problem of a file is reported at once, each naming the file, the
//     line (exact for YAML and JSON, the field's first plausible line for
//     Jsonnet, whose output has no positions) and the field, as
//     `web.jsonnet:12: resources.memory: must be > 0`.
//   - Render prints a spec in the same format Load reads, so a rendered
//     spec submits to exactly the spec that was rendered.
package jobfile
