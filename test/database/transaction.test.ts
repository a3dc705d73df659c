import t from 'tap'
import type { Db } from '../../src/database/index.js'
import { isUnavailable } from '../../src/database/errors.js'
import { inTransaction } from '../../src/database/transaction.js'
import { toDomainError } from '../../src/http/error-handler.js'
import { answerTo } from '../../src/http/problems.js'

const deadlock = () => Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 })

/** A handle whose transactions run `fn` at once: what inTransaction does around it is what is tested. */
const fakeDb = { transaction: () => ({ execute: <T>(fn: (trx: unknown) => Promise<T>) => fn({}) }) } as unknown as Db

t.test('a transaction losing deadlocks (a cluster\'s certification conflicts) is retried as a whole', async (t) => {
  let runs = 0
  const result = await inTransaction(fakeDb, async () => {
    runs++
    if (runs < 6) throw deadlock()
    return 'done'
  })
  t.equal(result, 'done')
  t.equal(runs, 6, 'five deadlocks, then success')
})

t.test('past eight attempts it gives up; the answer is 503 with Retry-After, not a 500 nor a database outage', async (t) => {
  let runs = 0
  const err = await inTransaction(fakeDb, async () => {
    runs++
    throw deadlock()
  }).catch((e: unknown) => e)
  t.equal(runs, 8)
  const answer = answerTo(toDomainError(err as Error)!)
  t.equal(answer.status, 503)
  t.equal(answer.problem.code, 'UNAVAILABLE')
  t.equal(answer.headers['retry-after'], '1')
  t.notOk(isUnavailable(err), 'not counted as the database being away')
  let other = 0
  await inTransaction(fakeDb, async () => {
    other++
    throw new Error('not a deadlock')
  }).catch(() => {})
  t.equal(other, 1, 'other errors are not retried')
  const galera = answerTo(toDomainError(Object.assign(new Error('WSREP has not yet prepared node for application use'), { code: 'ER_UNKNOWN_COM_ERROR', errno: 1047 }))!)
  t.equal(galera.status, 503, 'a Galera node outside the primary component: 503')
})

t.test('SQLite\'s busy, in any of its extended codes, is retried as a whole for 5 s, then answered 503, never 500', async (t) => {
  const busy = (code: string) => Object.assign(new Error('database is locked'), { code })
  for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_TIMEOUT']) {
    let runs = 0
    const result = await inTransaction(fakeDb, async () => {
      if (++runs < 12) throw busy(code)
      return 'done'
    })
    t.equal(result, 'done', `${code}: retried past the eight attempts a deadlock gets, until the lock is let go`)
    t.equal(runs, 12)
  }
  let runs = 0
  const started = Date.now()
  const err = await inTransaction(fakeDb, async () => {
    runs++
    throw busy('SQLITE_BUSY')
  }).catch((e: unknown) => e)
  const waited = Date.now() - started
  t.ok(waited >= 5000 && waited < 6000, `given up after 5 s (${waited} ms, ${runs} runs)`)
  t.equal(answerTo(toDomainError(err as Error)!).status, 503, '503')
})
