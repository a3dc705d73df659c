// The home-grown parts weighed against what they stand in for (ARCHITECTURE.md, "Home-grown parts"): each, and the
// library's way of doing the same, timed in this process on the same inputs, per self-read (a part a self-read uses
// twice counts twice). `npm run bench:profile` prints them beside Roster's CPU per self-read measured in the same
// run; a part that saves less than 2 % of it should go.
import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import pino from 'pino'
import { tokenHash } from '../src/accounts/secrets.js'
import { callerLookup, callerQuery } from '../src/auth/caller.js'
import { isoTimestamp } from '../src/common/timestamps.js'
import { createDatabase } from '../src/database/index.js'
import { accessLineRenderer, loggedUrl } from '../src/logging/access-log.js'

export interface PartWeight {
  part: string
  /** µs per self-read, the part's own way and the library's. */
  ours: number
  library: number
}

/** µs per call of fn, the best of `rounds` timed batches (the least disturbed by the host). */
async function timed(fn: (i: number) => unknown, calls = 20_000, rounds = 7): Promise<number> {
  let best = Infinity
  for (let round = 0; round < rounds; round++) {
    const started = process.hrtime.bigint()
    for (let i = 0; i < calls; i++) {
      const out = fn(i)
      if (out instanceof Promise) await out
    }
    best = Math.min(best, Number(process.hrtime.bigint() - started) / 1000 / calls)
  }
  return best
}

/** Weighs each part on the seeded SQLite file and its tokens (bench/profile.ts seeds them). */
export async function weighParts(sqliteFile: string, tokensFile: string): Promise<PartWeight[]> {
  const weights: PartWeight[] = []
  const sink = { write: (_line: string) => {} }
  const base = { pid: process.pid, hostname: hostname() }
  const render = accessLineRenderer(base)
  const logger = pino({ level: 'info', base }, sink)
  weights.push({
    part: 'the access line',
    ours: await timed((i) => sink.write(render(Date.now(), `req-${i}`, 'GET', '/users/42', 200, 1.5))),
    library: await timed((i) => logger.child({ reqId: `req-${i}` }).info({ method: 'GET', url: loggedUrl('/users/42'), statusCode: 200, ms: 1.5 }, 'request'))
  })
  const at = Date.now()
  weights.push({
    part: 'ISO timestamps (two a user)',
    ours: 2 * await timed((i) => isoTimestamp(at + i)),
    library: 2 * await timed((i) => new Date(at + i).toISOString())
  })
  const tokens = readFileSync(tokensFile, 'utf8').trim().split('\n').slice(0, 1000)
    .map((line) => tokenHash((JSON.parse(line) as { token: string }).token))
  const { db, read } = createDatabase({ url: `sqlite:${sqliteFile}` })
  const lookup = callerLookup(db, read)
  weights.push({
    part: 'direct read of the caller lookup',
    ours: await timed((i) => lookup(tokens[i % tokens.length]!), 5000),
    library: await timed((i) => callerQuery(db, tokens[i % tokens.length]!, Date.now()).executeTakeFirst(), 5000)
  })
  await db.destroy()
  return weights
}
