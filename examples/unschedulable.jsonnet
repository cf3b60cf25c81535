// unschedulable: asks for more memory than any machine has, so its task
// stays pending; `corral why unschedulable` says why. Best-effort needs no
// quota, so the job is admitted and waits.
//
//   corral job submit examples/unschedulable.jsonnet
//   corral why unschedulable
//   corral job kill unschedulable
{
  name: 'unschedulable',
  priority: 'best-effort',
  count: 1,
  command: '/bin/sleep',
  args: ['3600'],
  resources: { cpu: '100m', memory: '64TiB' },
}
