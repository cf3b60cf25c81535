// alloc: a web server and a logsaver sharing an alloc set (Borg §2.4).
//
// An alloc set reserves resources on machines whether or not they are used;
// jobs that name it run their tasks inside those reservations, so the
// server and its logsaver land together and the logsaver can read the
// server's logs. The file is a bundle: `alloc_sets` are created first, then
// every job of `jobs` is submitted.
//
//   corral job submit examples/alloc.jsonnet --wait
//   corral task list frontend
//   corral task logs logsaver 0
local set = 'webset';
local instances = 2;
// The directory both jobs of an alloc use on a machine.
local shared = '/tmp/corral-alloc-$CORRAL_USER-' + set;

{
  alloc_sets: [
    {
      name: set,
      priority: 'production',
      count: instances,
      labels: { team: 'examples' },
      // Room for one frontend task and one logsaver task.
      resources: { cpu: '500m', memory: '160MiB', ports: 1 },
    },
  ],
  jobs: [
    {
      name: 'frontend',
      alloc_set: set,
      priority: 'production',
      count: instances,
      labels: { team: 'examples' },
      command: '/bin/sh',
      args: [
        '-c',
        |||
          mkdir -p "%(dir)s"
          echo "<h1>frontend $CORRAL_TASK_INDEX</h1>" > index.html
          exec python3 -m http.server --bind 0.0.0.0 "$PORT" 2>> "%(dir)s/frontend-$CORRAL_TASK_INDEX.log"
        ||| % { dir: shared },
      ],
      port_names: ['http'],
      resources: { cpu: '300m', memory: '96MiB' },
      health_check: { path: '/', port: 'http', period: '5s', timeout: '2s' },
      restart: { mode: 'always', backoff: '1s' },
    },
    {
      name: 'logsaver',
      alloc_set: set,
      priority: 'production',
      count: instances,
      labels: { team: 'examples' },
      command: '/bin/sh',
      args: [
        '-c',
        |||
          mkdir -p "%(dir)s" saved
          while true; do
            for f in "%(dir)s"/*.log; do
              [ -f "$f" ] && cp "$f" "saved/$(basename "$f")" && echo "saved $(wc -l < "$f") lines of $f"
            done
            sleep 10
          done
        ||| % { dir: shared },
      ],
      resources: { cpu: '100m', memory: '32MiB' },
      restart: { mode: 'always', backoff: '1s' },
    },
  ],
}
