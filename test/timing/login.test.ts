import t from 'tap'
import { call, signUp, startBuilt } from '../blackbox/service.js'

// Timing is measured where nothing else runs: scripts/test.mjs runs this folder after both legs, alone.
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

t.test('a wrong password takes the same time for a known and an unknown address', async (t) => {
  const service = await startBuilt(t, { LOGIN_MAX_FAILURES: '1000', LOGIN_MAX_FAILURES_PER_CLIENT: '1000', LOGIN_MAX_FAILURES_PER_ACCOUNT: '1000' })
  await signUp(service, 'timed@example.com')
  const timed = async (email: string) => {
    const started = process.hrtime.bigint()
    const res = await call(service, 'POST', '/auth/tokens', { body: { email, password: 'not-the-password' } })
    t.equal(res.status, 401)
    return Number(process.hrtime.bigint() - started) / 1e6
  }
  for (let i = 0; i < 4; i++) { await timed('timed@example.com'); await timed('nobody@example.com') } // warm up
  // Alternating pairs, so that the machine's own drift (other tests, other processes) falls on both alike: the
  // median of the pairs' differences is what an attacker averaging many tries would see.
  const known: number[] = []
  const unknown: number[] = []
  const differences: number[] = []
  for (let i = 0; i < 40; i++) {
    known.push(await timed('timed@example.com'))
    unknown.push(await timed(`nobody${i}@example.com`))
    differences.push(known[i]! - unknown[i]!)
  }
  const gap = Math.abs(median(differences))
  t.ok(gap < 5, `medians ${median(known).toFixed(1)} ms (known) and ${median(unknown).toFixed(1)} ms (unknown); median difference of a pair ${gap.toFixed(1)} ms (< 5)`)
})
