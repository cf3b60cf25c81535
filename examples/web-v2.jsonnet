// web-v2: a good release of examples/web.jsonnet. It rolls one replica at
// a time, each waiting for the last to pass its health check, and commits
// itself once both serve it.
//
//   corral job update examples/web-v2.jsonnet --wait   # exits 0: committed
(import 'web.jsonnet') + {
  env: { WEB_VERSION: '2' },
}
