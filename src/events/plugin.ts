import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { Sequencer, type SequencerOptions } from './sequencer.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Places committed events in the feed, and purges them past EVENT_RETENTION_SECONDS. */
    sequencer: Sequencer
  }
  interface FastifyRequest {
    /** Whether the request wrote an event (its cause was told): it wakes the sequencer once answered. */
    wroteEvents: boolean
  }
}

/**
 * Events: written by the services in their transactions (record.ts); placed in the feed by the time the app is
 * ready, then in the background until it closes, woken after every write that wrote one and polled for other
 * instances' events.
 */
async function events(app: FastifyInstance, options: Partial<SequencerOptions>): Promise<void> {
  const sequencer = new Sequencer(app.db, app.log, {
    retentionMs: app.config.EVENT_RETENTION_SECONDS * 1000, purgeEveryMs: app.config.PURGE_INTERVAL_SECONDS * 1000, ...options
  })
  app.decorate('sequencer', sequencer)
  // Woken by the requests that wrote an event (committed, or rolled back: a wasted run), not by every write: a
  // refresh, which writes none, costs the feed nothing. A failed login's event comes after its answer and is placed
  // at the next poll.
  app.decorateRequest('wroteEvents', false)
  app.addHook('onResponse', (request, _reply, done) => {
    if (request.wroteEvents) sequencer.wake()
    done()
  })
  // What was committed during the start (the first admin's creation) is placed before the app is ready: a webhook
  // created once the service answers subscribes from then on, and gets none of it. A database that fails here
  // leaves it to the background runs, as any other time.
  app.addHook('onReady', async () => {
    const caughtUp = await sequencer.catchUp().then(() => true, (err: unknown) => {
      app.log.warn({ err }, 'events: could not place the events of the start yet')
      return false
    })
    sequencer.start(caughtUp)
  })
  app.addHook('preClose', async () => sequencer.stop())
}

export default fp(events, { name: 'events', dependencies: ['database'] })
