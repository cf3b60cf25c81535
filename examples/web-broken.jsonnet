// web-broken: a bad release of examples/web.jsonnet. It never answers its
// health check, so the rolling update halts at the first task and, web
// being a service, reverts by itself; the other replica serves throughout.
//
//   corral job update examples/web-broken.jsonnet --wait   # exits 1: reverted
//   corral job get web                                     # last update: reverted, and why
(import 'web.jsonnet') + {
  args: ['-c', 'exec sleep 3600'],
}
