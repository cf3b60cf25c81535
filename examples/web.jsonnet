// web: an HTTP server on $PORT with a health check, two replicas.
//
//   corral job submit examples/web.jsonnet --wait
//   corral task get web 0          # its address and DNS names
//   dig @127.0.0.1 -p 5353 web.$USER.dev.corral SRV
//   corral job update examples/web-broken.jsonnet --wait   # halts and reverts
//   corral job update examples/web-v2.jsonnet --wait       # commits itself
//
// The agent assigns each task a port and passes it as $PORT (and
// $PORT_HTTP, after the port's name); the health check asks GET / on it.
local replicas = 2;

{
  name: 'web',
  priority: 'production',
  count: replicas,
  appclass: 'latency-sensitive',
  labels: { team: 'examples', tier: 'frontend' },
  command: '/bin/sh',
  args: [
    '-c',
    |||
      echo "<h1>web ${WEB_VERSION:-1}: task $CORRAL_TASK_INDEX of $CORRAL_USER/$CORRAL_JOB</h1>" > index.html
      exec python3 -m http.server --bind 0.0.0.0 "$PORT"
    |||,
  ],
  port_names: ['http'],
  resources: { cpu: '250m', memory: '96MiB' },
  health_check: { path: '/', port: 'http', period: '2s', timeout: '1s', failures_allowed: 2 },
  restart: { mode: 'always', backoff: '1s', max_backoff: '30s' },
  update: { max_disruptions: 1 },
}
