import { executionAsyncResource } from 'node:async_hooks'

/**
 * Keeps one of `process.nextTick`'s queue entries alive for the life of the process, so that the hidden class those
 * entries share is never collected. `npm start` and the container load this module with `--import`, before anything
 * else, and server.ts imports it first for a start without the flag.
 *
 * Why: `nextTick` builds each entry with an object literal whose first keys are computed (two symbols). V8 (Node 20)
 * caches how such a literal stores its later keys for one hidden class only, held weakly. When a full garbage
 * collection runs while no entry is queued, the class is freed, the next entry gets a new one, and the cache gives up
 * for good (megamorphic): from then on every `nextTick` defines its entry's properties in V8's runtime. A request
 * makes several (its stream ending, the answer's write completing, the response finishing). A service is idle after
 * its start, when such a collection comes, and the running service measured lost the cache within a second of
 * listening. One entry held keeps the class, and the cache, in place: the embedded self-read at `warn` (the server on
 * one core, four alternating rounds) went from 45.0–46.9 to 41.5–41.9 µs of CPU a request (BENCHMARKS.md, "The
 * embedded engine"). test/blackbox/tick-shape.test.ts holds the built service to it. Measured with tracing off: with
 * OpenTelemetry on, its context store adds a property to each entry, and that store's own cache is not held.
 *
 * The entry is the one running this module's own tick: it stays queued, and keeps the class, until its callback
 * takes it, so no collection falls between. No async hook is enabled for it.
 */
let held: object | undefined
process.nextTick(() => {
  held = executionAsyncResource()
})

/** The entry held (undefined until this module's tick has run). */
export function heldTickEntry(): object | undefined {
  return held
}
