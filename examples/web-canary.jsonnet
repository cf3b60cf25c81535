// web-canary: a release tried on one replica first. The update replaces
// task 0 and waits; `corral job promote web` rolls the rest, `corral job
// rollback web` undoes the canary.
//
//   corral job update examples/web-canary.jsonnet --wait   # exits 0: canary healthy
//   corral job promote web
(import 'web.jsonnet') + {
  env: { WEB_VERSION: '3' },
  update+: { canary: 1 },
}
