// The scale test (npm run cluster:test): two Roster instances behind HAProxy over a three-node Galera cluster,
// sharing Redis. Load with writes and reads through the balancer; a Galera node killed (SIGKILL) mid-load, then a
// Roster instance; both brought back. Then, node by node: every acknowledged write is there, the nodes agree (row
// counts and a checksum per table), and no invariant broke. Prints the figures; exits 1 when a write was lost, the
// nodes disagree or an invariant broke. `--short` runs a shorter load (CI); `--keep` leaves the cluster up.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createConnection } from 'mysql2/promise'

const args = new Set(process.argv.slice(2))
const SHORT = args.has('--short')
const LOAD_MS = SHORT ? 24_000 : 48_000
const THROUGHPUT_S = SHORT ? 5 : 10
const WORKERS = 12
const ADMIN = { email: 'feed-reader@example.com', password: 'feed-reader-password-1' }
/** How long a client waits after a failed request before its next one, as a real client backs off. */
const RETRY_DELAY_MS = 100
const FRONT = 'http://127.0.0.1:3100'
const INSTANCES = { a: 3101, b: 3102 } as const
const NODES = [3311, 3312, 3313]
const TABLES = ['users', 'emails', 'tokens', 'sessions', 'refresh_tokens', 'email_tokens', 'outbox', 'idempotency_keys', 'app_secrets', 'events', 'event_sequence', 'webhooks']
const cluster = (...a: string[]) => execFileSync('bash', ['scripts/cluster/cluster.sh', ...a], { stdio: 'inherit' })
const log = (line: string) => console.log(`# ${line}`)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

// ---- the instances ----

const prefix = `roster-cluster-${randomBytes(3).toString('hex')}:`
const running = new Map<keyof typeof INSTANCES, ChildProcess>()

function startInstance(name: keyof typeof INSTANCES, migrate: boolean): ChildProcess {
  const child = spawn(process.execPath, ['dist/src/server.js'], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      ...process.env,
      PORT: String(INSTANCES[name]), HOST: '127.0.0.1', LOG_LEVEL: 'error',
      DATABASE_URL: 'mysql://root@127.0.0.1:3310/roster', MIGRATE_ON_START: String(migrate),
      RATE_LIMIT_REDIS_URL: 'redis://127.0.0.1:6379', REDIS_KEY_PREFIX: prefix,
      RATE_LIMIT_MAX: '100000000', LOGIN_MAX_FAILURES: '100000', LOGIN_MAX_FAILURES_PER_CLIENT: '100000', MAIL_MAX_PER_CLIENT: '100000',
      DB_POOL_SIZE: '8', METRICS_PORT: '0', ADMIN_EMAIL: ADMIN.email, ADMIN_PASSWORD: ADMIN.password
    }
  })
  running.set(name, child)
  return child
}

async function ready(url: string, seconds = 30): Promise<void> {
  for (let i = 0; i < seconds * 10; i++) {
    try {
      if ((await fetch(`${url}/health/ready`)).ok) return
    } catch { /* not yet */ }
    await sleep(100)
  }
  throw new Error(`${url} not ready within ${seconds} s`)
}

// ---- the load ----

/**
 * What the service acknowledged (2xx), and what it may have done without saying so (a request whose answer was
 * lost or 5xx may have been applied): a removal attempted without an answer makes its address's absence no loss.
 */
interface Acked { users: Map<string, number>; addresses: Map<string, number>; removed: Set<string>; triedRemoving: Set<string>; names: Map<number, string[]> }
const acked: Acked = { users: new Map(), addresses: new Map(), removed: new Set(), triedRemoving: new Set(), names: new Map() }
const failures: number[] = []
const statuses = new Map<string, number>()
let requests = 0

async function call(method: string, path: string, token?: string, body?: unknown, headers: Record<string, string> = {}) {
  requests++
  try {
    const res = await fetch(FRONT + path, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(10_000)
    })
    const key = String(res.status)
    statuses.set(key, (statuses.get(key) ?? 0) + 1)
    if (res.status >= 500) {
      failures.push(Date.now())
      await sleep(RETRY_DELAY_MS)
    }
    const text = await res.text()
    return { status: res.status, etag: res.headers.get('etag'), json: text ? JSON.parse(text) : null }
  } catch {
    statuses.set('network', (statuses.get('network') ?? 0) + 1)
    failures.push(Date.now())
    await sleep(RETRY_DELAY_MS)
    return { status: 0, etag: null, json: null }
  }
}

async function signUp(tag: string): Promise<{ id: number; email: string } | undefined> {
  const email = `${tag}.${randomBytes(4).toString('hex')}@example.com`
  const res = await call('POST', '/users', undefined, { name: `Load ${tag}`, email, password: 'load-password-1' })
  if (res.status !== 201) return undefined
  acked.users.set(email, res.json.id)
  return { id: res.json.id, email }
}

async function worker(w: number, until: number): Promise<void> {
  let me: { id: number; email: string } | undefined
  let token: string | undefined
  let mine: Array<{ id: number; address: string }> = []
  let n = 0
  while (Date.now() < until) {
    n++
    if (!me || !token) {
      me = await signUp(`w${w}`)
      if (!me) continue
      const login = await call('POST', '/auth/tokens', undefined, { email: me.email, password: 'load-password-1' })
      token = login.status === 201 ? login.json.token : undefined
      mine = []
      continue
    }
    const step = n % 5
    if (step === 0) {
      await signUp(`s${w}`)
    } else if (step === 1) {
      const address = `a${w}.${n}.${randomBytes(3).toString('hex')}@example.com`
      const res = await call('POST', `/users/${me.id}/emails`, token, { address })
      if (res.status === 201) {
        acked.addresses.set(address, me.id)
        mine.push({ id: res.json.id, address })
      }
      if (mine.length > 5) {
        const gone = mine.shift()!
        acked.triedRemoving.add(gone.address)
        const del = await call('DELETE', `/users/${me.id}/emails/${gone.id}`, token)
        if (del.status === 204) acked.removed.add(gone.address)
      }
    } else if (step === 2) {
      const read = await call('GET', `/users/${me.id}`, token)
      if (read.status === 200 && read.etag) {
        const name = `Renamed ${w}.${n}`
        const tries = acked.names.get(me.id) ?? []
        tries.push(`?${name}`) // attempted; made definite below once acknowledged
        acked.names.set(me.id, tries)
        const res = await call('PUT', `/users/${me.id}/name`, token, { name }, { 'if-match': read.etag })
        if (res.status === 200) tries[tries.length - 1] = name
      }
    } else {
      await call('GET', `/users/${me.id}`, token)
    }
  }
}

// ---- the feed, followed through the faults ----

/** Every event id the reader saw, in the order it saw them, and where it stands. */
const feedSeen: string[] = []
let feedAfter: string | undefined

/** Follows the feed from where the reader stands to its end (`next` null), as a company's backend does. */
async function followFeed(token: string): Promise<boolean> {
  let path: string | null = `/events?limit=200${feedAfter ? `&after=${feedAfter}` : ''}`
  while (path) {
    const res = await call('GET', path, token)
    if (res.status !== 200) return false
    for (const event of res.json.items as Array<{ id: string }>) feedSeen.push(event.id)
    feedAfter = feedSeen[feedSeen.length - 1] ?? feedAfter
    path = res.json.next
  }
  return true
}

/** The whole feed, read afresh from its start. */
async function wholeFeed(token: string): Promise<string[]> {
  const ids: string[] = []
  let path: string | null = '/events?limit=200'
  while (path) {
    const res = await call('GET', path, token)
    if (res.status !== 200) throw new Error(`reading the feed: ${res.status}`)
    for (const event of res.json.items as Array<{ id: string }>) ids.push(event.id)
    path = res.json.next
  }
  return ids
}

// ---- checks ----

async function nodeFacts(port: number) {
  const conn = await createConnection({ host: '127.0.0.1', port, user: 'root', database: 'roster' })
  try {
    const counts: Record<string, number> = {}
    const sums: Record<string, string> = {}
    for (const table of TABLES) {
      const [c] = await conn.query(`select count(*) as n from \`${table}\``) as unknown as [Array<{ n: number }>]
      counts[table] = Number(c[0]!.n)
      const [s] = await conn.query(`checksum table \`${table}\``) as unknown as [Array<{ Checksum: number | string }>]
      sums[table] = String(s[0]!.Checksum)
    }
    const [addresses] = await conn.query('select address, user_id from emails') as unknown as [Array<{ address: string; user_id: number }>]
    const [users] = await conn.query('select id, name from users') as unknown as [Array<{ id: number; name: string }>]
    const [noPrimary] = await conn.query(
      'select user_id from emails group by user_id having sum(primary_user_id is not null) <> 1') as unknown as [unknown[]]
    const [twice] = await conn.query('select address_norm from emails group by address_norm having count(*) > 1') as unknown as [unknown[]]
    return {
      counts, sums, addresses: new Map(addresses.map((r) => [r.address, Number(r.user_id)])), users: new Map(users.map((u) => [Number(u.id), u.name])),
      broken: noPrimary.length + twice.length
    }
  } finally {
    await conn.end()
  }
}

/** Failures between two instants: how many, and how long after the first instant the last one came. */
function window(since: number, until: number): { count: number; lastAfterMs: number } {
  const inWindow = failures.filter((t) => t >= since && t < until)
  return { count: inWindow.length, lastAfterMs: inWindow.length ? Math.max(...inWindow) - since : 0 }
}

async function throughput(url: string, path: string, token: string): Promise<number> {
  const { default: autocannon } = await import('autocannon')
  const result = await autocannon({ url: url + path, connections: 24, duration: THROUGHPUT_S, headers: { authorization: `Bearer ${token}` } })
  return Math.round(result.requests.average)
}

// ---- the run ----

let failed = false
try {
  cluster('install')
  log('starting a three-node Galera cluster and HAProxy')
  const upAt = Date.now()
  cluster('up')
  log(`cluster synced in ${((Date.now() - upAt) / 1000).toFixed(1)} s`)
  execFileSync('mariadb', ['--protocol=tcp', '-h', '127.0.0.1', '-P', '3311', '-u', 'root', '-e', 'create database roster character set utf8mb4'])
  execFileSync('npm', ['run', '-s', 'build'], { stdio: 'inherit' })
  startInstance('a', true)
  await ready(`http://127.0.0.1:${INSTANCES.a}`)
  await ready(FRONT)

  // Throughput through the balancer: one instance behind it, then two (self-reads of one user).
  const probe = await signUp('probe')
  const probeLogin = await call('POST', '/auth/tokens', undefined, { email: probe!.email, password: 'load-password-1' })
  const one = await throughput(FRONT, `/users/${probe!.id}`, probeLogin.json.token)
  startInstance('b', false)
  await ready(`http://127.0.0.1:${INSTANCES.b}`)
  await sleep(1500) // HAProxy's health check takes b in (rise 2 × 500 ms)
  const two = await throughput(FRONT, `/users/${probe!.id}`, probeLogin.json.token)
  log(`throughput through HAProxy (self-reads, 24 connections, ${THROUGHPUT_S} s): 1 instance ${one} req/s, 2 instances ${two} req/s`)
  statuses.clear()
  failures.length = 0
  requests = 0

  // Load with faults, and a reader following the feed through them.
  const adminLogin = await call('POST', '/auth/tokens', undefined, ADMIN)
  if (adminLogin.status !== 201) throw new Error(`the feed reader could not log in: ${adminLogin.status}`)
  const adminToken: string = adminLogin.json.token
  const start = Date.now()
  const until = start + LOAD_MS
  const load = Promise.all([
    ...Array.from({ length: WORKERS }, (_, w) => worker(w, until)),
    (async () => { while (Date.now() < until) { await followFeed(adminToken); await sleep(250) } })()
  ])
  const at = (fraction: number) => sleep(Math.max(0, start + LOAD_MS * fraction - Date.now()))
  await at(0.2)
  const nodeKilled = Date.now()
  cluster('kill', '2')
  log(`t=${((nodeKilled - start) / 1000).toFixed(1)} s: Galera node 2 killed (SIGKILL)`)
  await at(0.4)
  const instanceKilled = Date.now()
  running.get('a')!.kill('SIGKILL')
  log(`t=${((instanceKilled - start) / 1000).toFixed(1)} s: Roster instance a killed (SIGKILL)`)
  await at(0.55)
  const nodeBack = Date.now()
  cluster('start', '2')
  log(`t=${((Date.now() - start) / 1000).toFixed(1)} s: node 2 rejoined and synced (${((Date.now() - nodeBack) / 1000).toFixed(1)} s)`)
  await at(0.65)
  const instanceBack = Date.now()
  startInstance('a', false)
  await ready(`http://127.0.0.1:${INSTANCES.a}`)
  log(`t=${((Date.now() - start) / 1000).toFixed(1)} s: instance a back (${((Date.now() - instanceBack) / 1000).toFixed(1)} s to ready)`)
  await load
  const end = Date.now()
  // The reader catches up, then the whole feed is read afresh: it must have seen each event once, none missed.
  for (let i = 0; i < 20 && !(await followFeed(adminToken)); i++) await sleep(500)
  const whole = await wholeFeed(adminToken)
  const twice = feedSeen.length - new Set(feedSeen).size
  const missed = whole.filter((id) => !new Set(feedSeen).has(id)).length
  const inOrder = feedSeen.length === whole.length && feedSeen.every((id, i) => whole[i] === id)
  log(`feed: ${whole.length} events; the reader saw ${feedSeen.length}, ${missed} missed, ${twice} twice, ${inOrder ? 'in the same order' : 'NOT in the same order'}`)
  if (missed > 0 || twice > 0 || !inOrder) failed = true

  // Quiesce: the instances stop (their deliverers write the outbox), the nodes settle.
  for (const child of running.values()) child.kill('SIGTERM')
  await sleep(1500)
  for (const port of [1, 2, 3]) cluster('wait', String(port), '60')

  const facts = await Promise.all(NODES.map(nodeFacts))
  let lost = 0
  for (const [n, f] of facts.entries()) {
    const missingUsers = [...acked.users.keys()].filter((email) => !f.addresses.has(email))
    const missingAddresses = [...acked.addresses.keys()].filter((a) => !acked.triedRemoving.has(a) && !f.addresses.has(a))
    const resurrected = [...acked.removed].filter((a) => f.addresses.has(a))
    let wrongNames = 0
    for (const [id, tries] of acked.names) {
      const lastAcked = tries.map((x, i) => [x, i] as const).filter(([x]) => !x.startsWith('?')).pop()
      if (!lastAcked) continue
      const allowed = new Set([lastAcked[0], ...tries.slice(lastAcked[1] + 1).map((x) => x.replace(/^\?/, ''))])
      if (!allowed.has(f.users.get(id) ?? '')) wrongNames++
    }
    const nodeLost = missingUsers.length + missingAddresses.length + resurrected.length + wrongNames
    lost = Math.max(lost, nodeLost)
    log(`node ${n + 1}: ${missingUsers.length} acknowledged sign-ups missing, ${missingAddresses.length} addresses missing, ${resurrected.length} removed addresses back, ${wrongNames} renames lost; invariants broken: ${f.broken}`)
    if (f.broken > 0) failed = true
  }
  const agree = TABLES.every((t) => facts.every((f) => f.counts[t] === facts[0]!.counts[t] && f.sums[t] === facts[0]!.sums[t]))
  for (const table of TABLES) log(`${table}: ${facts.map((f) => `${f.counts[table]} rows (checksum ${f.sums[table]})`).join(' | ')}`)

  const fiveXX = [...statuses].filter(([s]) => s === 'network' || Number(s) >= 500).reduce((sum, [, n]) => sum + n, 0)
  const writes = acked.users.size + acked.addresses.size + acked.removed.size + [...acked.names.values()].flat().filter((x) => !x.startsWith('?')).length
  console.log('\n| figure | value |\n|---|---|')
  console.log(`| load | ${WORKERS} clients for ${(LOAD_MS / 1000).toFixed(0)} s through HAProxy: ${requests} requests, ${Math.round(requests / ((end - start) / 1000))} req/s |`)
  console.log(`| answers | ${[...statuses].sort().map(([s, n]) => `${s}: ${n}`).join(', ')} |`)
  console.log(`| acknowledged writes | ${writes} (sign-ups ${acked.users.size}, addresses added ${acked.addresses.size} and removed ${acked.removed.size}, renames) |`)
  console.log(`| acknowledged writes lost | ${lost} |`)
  console.log(`| 5xx or no answer | ${fiveXX} |`)
  const phases: Array<[string, number, number]> = [
    ['before any fault', start, nodeKilled], ['node 2 killed', nodeKilled, instanceKilled],
    ['instance a killed', instanceKilled, nodeBack], ['node 2 and instance a coming back', nodeBack, end]
  ]
  for (const [label, from, to] of phases) {
    const w = window(from, to)
    console.log(`| failures, ${label} (${((to - from) / 1000).toFixed(1)} s) | ${w.count}${w.count ? `, the last ${(w.lastAfterMs / 1000).toFixed(1)} s in` : ''} |`)
  }
  console.log(`| throughput, 1 instance / 2 instances | ${one} / ${two} req/s |`)
  console.log(`| nodes agree (row counts, checksums) | ${agree ? 'yes' : 'NO'} |`)
  console.log(`| the feed, followed through the faults | ${whole.length} events: ${missed} missed, ${twice} seen twice, ${inOrder ? 'same order as a fresh read' : 'ORDER DIFFERS'} |`)
  if (lost > 0 || !agree) failed = true
} catch (err) {
  console.error(err)
  failed = true
} finally {
  for (const child of running.values()) child.kill('SIGKILL')
  if (!args.has('--keep')) cluster('down')
}
console.log(failed ? 'cluster test FAILED' : 'cluster test passed')
process.exit(failed ? 1 : 0)
