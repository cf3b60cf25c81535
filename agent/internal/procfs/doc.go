// Package procfs reads the few /proc files the agent needs: a process's
// identity (start time, process group, state), its CPU and resident memory,
// the machine's memory and boot id.
//
// Invariant: a process is identified by (pid, start time); a pid alone is
// reused by the kernel and never trusted on its own.
package procfs
