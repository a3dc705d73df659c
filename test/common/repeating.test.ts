import t from 'tap'
import { Repeating } from '../../src/common/repeating.js'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('runs again and again, a turn after the last run ended; a failed run is reported and tried again', async (t) => {
  const started: number[] = []
  const failures: unknown[] = []
  let running = 0
  let overlapped = false
  const job = new Repeating(10, async () => {
    if (running > 0) overlapped = true
    running++
    started.push(Date.now())
    await sleep(30)
    running--
    if (started.length === 2) throw new Error('second run fails')
  }, (err) => failures.push(err))
  job.start()
  const deadline = Date.now() + 10_000
  while (started.length < 4 && Date.now() < deadline) await sleep(10)
  await job.stop()
  t.ok(started.length >= 4, `ran ${started.length} times`)
  t.notOk(overlapped, 'never two runs at once, though a run lasts longer than the interval')
  t.equal(failures.length, 1, 'the failure was reported once')
  t.match(String(failures[0]), /second run fails/)
  for (let i = 1; i < started.length; i++) t.ok(started[i]! - started[i - 1]! >= 38, 'each run starts an interval after the last ended')
})

t.test('stop() waits for a run under way, and nothing runs after it', async (t) => {
  let runs = 0
  let finished = false
  const job = new Repeating(5, async () => {
    runs++
    await sleep(100)
    finished = true
  }, () => {})
  job.start()
  while (runs === 0) await sleep(2)
  await job.stop()
  t.ok(finished, 'the run under way had ended when stop() settled')
  const after = runs
  await sleep(50)
  t.equal(runs, after, 'no run after stop()')
})

t.test('nothing runs before the first interval, and a stopped job that never ran settles at once', async (t) => {
  let runs = 0
  const job = new Repeating(60_000, async () => { runs++ }, () => {})
  job.start()
  await sleep(30)
  await job.stop()
  t.equal(runs, 0)
})

t.test('a job that throws before returning its promise is reported and tried again, the process unharmed', async (t) => {
  const failures: unknown[] = []
  let runs = 0
  const job = new Repeating(5, () => {
    runs++
    throw new Error('thrown at once')
  }, (err) => failures.push(err))
  job.start()
  const deadline = Date.now() + 5_000
  while (runs < 3 && Date.now() < deadline) await sleep(5)
  await job.stop()
  t.ok(runs >= 3, `tried again after each failure (${runs} runs)`)
  t.ok(failures.length >= 3 && failures.every((err) => /thrown at once/.test(String(err))), 'each failure reported')
})
