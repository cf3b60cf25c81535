// hello: five tasks of a shell loop, each greeting every few seconds.
//
//   corral job submit examples/hello.jsonnet --wait
//   corral task list hello
//   corral task logs hello 0
//
// A Jsonnet file evaluates to a job spec (or a bundle, see alloc.jsonnet);
// `corral job render examples/hello.jsonnet` prints what it resolves to.
local greeting = 'hello';

{
  name: 'hello',
  priority: 'batch',  // a band: monitoring, production, batch or best-effort
  count: 5,
  labels: { team: 'examples' },
  command: '/bin/sh',
  args: [
    '-c',
    |||
      i=0
      while true; do
        echo "%s from task $CORRAL_TASK_INDEX of $CORRAL_USER/$CORRAL_JOB (round $i)"
        i=$((i + 1))
        sleep 5
      done
    ||| % greeting,
  ],
  resources: { cpu: '100m', memory: '32MiB' },
  restart: { mode: 'always', backoff: '1s', max_backoff: '30s' },
}
