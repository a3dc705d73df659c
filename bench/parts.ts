// The parts where a choice between a home-grown way and a library's was weighed (ARCHITECTURE.md, "Home-grown
// parts"): both ways timed in this process on the same inputs, per self-read. `npm run bench:profile` prints them
// beside Roster's CPU per self-read measured in the same run; a home-grown part that saves less than 2 % of it goes.
import { closeSync, openSync } from 'node:fs'
import { hostname } from 'node:os'
import sonicBoom from 'sonic-boom'
import { stdoutDestination } from '../src/logging/destination.js'

export interface PartWeight {
  part: string
  /** What Roster does, and the other way of doing it: µs per self-read each. */
  roster: string
  rosterUs: number
  other: string
  otherUs: number
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

/** Weighs each part. */
export async function weighParts(): Promise<PartWeight[]> {
  const weights: PartWeight[] = []
  // The destination every access line goes to: lines gathered in an array and handed to sonic-boom a batch at a time
  // (logging/destination.ts), against sonic-boom gathering them itself (its minLength), both into /dev/null, so
  // that the system call is the same and what differs is the bookkeeping.
  const line = `{"level":30,"time":${Date.now()},"pid":${process.pid},"hostname":"${hostname()}","request_id":"b5d97684-c4e3-4c1f-b3ae-542922c3e38c",` +
    '"method":"GET","url":"/users/42","statusCode":200,"ms":1.5,"client":"127.0.0.1","user_id":42,"msg":"request"}\n'
  const boom = new sonicBoom.SonicBoom({ dest: '/dev/null', sync: true, minLength: 4096, maxLength: 1 << 20 })
  await new Promise((resolve) => boom.once('ready', resolve))
  const devNull = openSync('/dev/null', 'w')
  const destination = stdoutDestination(devNull)
  weights.push({
    part: 'log destination', roster: 'an array batch into sonic-boom', rosterUs: await timed(() => destination.write(line)),
    other: 'sonic-boom\'s own batching', otherUs: await timed(() => boom.write(line))
  })
  destination.close()
  closeSync(devNull)
  boom.flushSync()
  boom.end()
  return weights
}
