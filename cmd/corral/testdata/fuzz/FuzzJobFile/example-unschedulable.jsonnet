go test fuzz v1
uint8(0)
[]byte("// unschedulable: asks for more memory than any machine has, so its task\n// stays pending; `corral why unschedulable` says why. Best-effort needs no\n// quota, so the job is admitted and waits.\n//\n//   corral job submit examples/unschedulable.jsonnet\n//   corral why unschedulable\n//   corral job kill unschedulable\n{\n  name: 'unschedulable',\n  priority: 'best-effort',\n  count: 1,\n  command: '/bin/sleep',\n  args: ['3600'],\n  resources: { cpu: '100m', memory: '64TiB' },\n}\n")
