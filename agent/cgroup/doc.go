// Package cgroup puts a corral task's processes in a resource container and
// reads what they use. One small interface, Manager and Container, has three
// implementations:
//
//   - V2, the unified hierarchy: memory.max, cpu.weight, cpu.max; usage from
//     memory.current and cpu.stat; OOM kills from memory.events.
//   - V1, the memory, cpu and cpuacct controllers: memory.limit_in_bytes,
//     cpu.shares, cpu.cfs_quota_us; usage from memory.usage_in_bytes and
//     cpuacct.usage; OOM kills from memory.oom_control.
//   - Sampling, where no cgroup can be used: nothing is enforced by the
//     kernel (KernelEnforced is false) and usage is summed from /proc over
//     the task's process group. The caller must then enforce memory limits by
//     killing, and must say at start that it does.
//
// Detect picks the first that works, in that order, and returns a note
// saying why the better ones could not be used. One test suite
// (suite_test.go, TestManagers) runs over all three, each declaring which
// of its promises it makes (containers that outlive the agent; real
// processes counted and killed): v2 on the kernel's unified hierarchy where
// it offers memory and cpu, else on a directory shaped like one.
//
// Invariants:
//   - Every container lives under the manager's parent path, so List finds
//     every container a previous agent left behind, and nothing outside it is
//     ever touched.
//   - A process joins its container before it runs any of the task's code:
//     the launcher writes the new pid into JoinFiles and only then execs the
//     task (cgroup v1 has no way to fork straight into a cgroup).
//   - Destroy kills every process still in the container before removing it.
package cgroup
