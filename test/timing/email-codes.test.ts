import t from 'tap'
import { build, newUser } from '../helpers.js'
import { TestSmtp } from '../mail/smtp.js'

// Timing is measured where nothing else runs: scripts/test.mjs runs this folder after both legs, alone.

t.test('sign-in code requests take the same time whether or not the address may sign in', async (t) => {
  const smtp = await TestSmtp.start(t)
  const app = await build(t, { env: { SMTP_URL: smtp.url, MAIL_MAX_PER_CLIENT: '1000' }, mail: { pollMs: 50 } })
  const known: string[] = []
  for (let i = 0; i < 12; i++) known.push((await newUser(app, { email: `coded${i}@example.com` })).email)
  const bodies = new Set<string>()
  const timed = async (email: string) => {
    const started = process.hrtime.bigint()
    const res = await app.inject({ method: 'POST', url: '/auth/email-codes', payload: { email } })
    t.equal(res.statusCode, 202)
    bodies.add(res.body)
    return Number(process.hrtime.bigint() - started) / 1e6
  }
  const existing: number[] = []
  const missing: number[] = []
  for (let i = 0; i < known.length; i++) {
    existing.push(await timed(known[i]!))
    missing.push(await timed(`nobody${i}@example.com`))
  }
  t.equal(bodies.size, 1, 'one body for every address')
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const gap = Math.abs(median(existing) - median(missing))
  t.ok(gap < 5, `medians ${median(existing).toFixed(1)} ms (exists) and ${median(missing).toFixed(1)} ms (does not) are within 5 ms (gap ${gap.toFixed(1)} ms)`)
})
