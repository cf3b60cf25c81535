// batch: four tasks that compute for a while and finish. Task 3 is given
// more work by a per-task override; a failed task is retried up to 3 times.
//
//   corral job submit examples/batch.jsonnet --wait
//   corral events --job batch
local work(seconds) = [
  '-c',
  |||
    echo "task $CORRAL_TASK_INDEX: working for %d seconds"
    sleep %d
    echo "task $CORRAL_TASK_INDEX: done"
  ||| % [seconds, seconds],
];

{
  name: 'batch',
  priority: 'batch',
  count: 4,
  appclass: 'batch',
  labels: { team: 'examples' },
  command: '/bin/sh',
  args: work(10),
  tasks: {
    '3': { args: work(20) },
  },
  resources: { cpu: '200m', memory: '32MiB' },
  restart: { mode: 'on-failure', max_restarts: 3, backoff: '1s' },
}
