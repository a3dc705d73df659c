import { createHook } from 'node:async_hooks'

/**
 * Keeps one of `process.nextTick`'s queue entries alive for the life of the process, so that the hidden class those
 * entries share is never collected.
 *
 * Why: `nextTick` builds each entry with an object literal whose first keys are computed (two symbols). V8 (Node 20)
 * caches how such a literal stores its later keys for one hidden class only, held weakly. When a full garbage
 * collection runs while no entry is queued, the class is freed, the next entry gets a new one, and the cache gives up
 * for good (megamorphic): from then on every `nextTick` defines its entry's properties in V8's runtime. A request
 * makes several (its stream ending, the answer's write completing, the response finishing). A service is idle after
 * its start, when such a collection comes, and the running service measured lost the cache within a second of
 * listening. One entry held keeps the class, and the cache, in place: the embedded self-read at `warn` (the server on
 * one core, four alternating rounds) went from 45.0–46.9 to 41.5–41.9 µs of CPU a request (BENCHMARKS.md, "The
 * embedded engine"). test/blackbox/tick-shape.test.ts holds the built service to it.
 *
 * The entry is taken as it is made, through an async hook enabled for that one call and disabled at once, so that no
 * hook runs afterwards. Where a Node version makes no such entry, nothing is held.
 */
export function holdTickShape(): object | undefined {
  let held: object | undefined
  const hook = createHook({
    init(_id, type, _trigger, resource) {
      if (type === 'TickObject' && held === undefined) held = resource
    }
  })
  hook.enable()
  try {
    process.nextTick(noop)
  } finally {
    hook.disable()
  }
  return held
}

function noop(): void {}

/** The entry the running service holds: server.ts imports this module before any other. */
export const heldTickEntry = holdTickShape()
