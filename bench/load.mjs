// The load generator, run as its own process: one autocannon scenario for a fixed time at a fixed concurrency.
// Input: one JSON argument; output: one JSON line with the figures.
import { readFileSync } from 'node:fs'
import autocannon from 'autocannon'

const input = JSON.parse(process.argv[2])
const { url, scenario, duration, connections, adminToken, password } = input
const users = readFileSync(input.tokensFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((u) => u.status === 'ACTIVE')
let nextUser = 0
const pick = () => users[nextUser++ % users.length]
const random = () => users[Math.floor(Math.random() * users.length)]
const bearer = (u) => ({ authorization: `Bearer ${u.token}` })
/** Every rename a new name, in every run of this process: a rename to the name a user has writes nothing. */
let renames = 0
const json = { 'content-type': 'application/json' }
/** Sessions of the refresh scenario not in use by a request: { user, refresh }, started before the run (sessionsFile). */
const sessions = input.sessionsFile ? readFileSync(input.sessionsFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) : []

/** A request made as a seeded user acting on itself, the users taken in turn (autocannon's context lasts one request). */
const asOwnUser = (build) => [{
  setupRequest: (req, context) => {
    context.user ??= pick()
    const own = build(context.user, context)
    return { ...req, ...own, headers: { ...bearer(context.user), ...(own.headers ?? {}) } }
  }
}]

/** A GET as the admin, of a path drawn for each request. */
const asAdmin = (path) => ({ headers: { authorization: `Bearer ${adminToken}` }, requests: [{ setupRequest: (r) => ({ ...r, method: 'GET', path: path() }) }] })

const scenarios = {
  // 1. each connection reads itself with its own token: the hot path
  'self-read': { requests: asOwnUser((u) => ({ method: 'GET', path: `/users/${u.id}` })) },
  // 2. admin: name prefix filter (a prefix matching about ten users)
  'name-prefix': asAdmin(() => `/users?name=${encodeURIComponent(random().name.toLowerCase().slice(0, -1))}*`),
  // 3. admin: exact address filter
  'email-filter': asAdmin(() => `/users?email=${encodeURIComponent(random().email.toUpperCase())}`),
  // 4. each connection lists its own addresses
  'own-emails': { requests: asOwnUser((u) => ({ method: 'GET', path: `/users/${u.id}/emails` })) },
  // 5. each connection renames itself (JSON key path)
  'rename': {
    requests: asOwnUser((u) => ({ method: 'PUT', path: `/users/${u.id}/name`, headers: json, body: JSON.stringify({ name: `Renamed ${u.id} ${process.pid}.${++renames}` }) }))
  },
  // 6. refreshes alone: each request takes a session started before the run from a pool, spends its last refresh token,
  //    and its answer puts the session back with the new one (autocannon's context lives from a setup to its response).
  'refresh': {
    requests: [{
      setupRequest: (req, context) => {
        const session = sessions.pop()
        if (!session) throw new Error('the refresh scenario ran out of sessions: start more than there are connections')
        context.session = session
        return { ...req, method: 'POST', path: '/auth/tokens', headers: json, body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: session.refresh }) }
      },
      onResponse: (status, body, context) => {
        if (status !== 201) return // counted as non-2xx: the run is invalid
        context.session.refresh = JSON.parse(body).refresh_token
        sessions.push(context.session)
      }
    }]
  },
  // 7. logins: bounded by argon2id by design
  'login': { requests: [{ setupRequest: (r) => { const u = random(); return { ...r, method: 'POST', path: '/auth/tokens', headers: json, body: JSON.stringify({ email: u.email, password }) } } }] },
  // 8. admin: a page of 200 users, through the API and through SCIM
  'list-200': asAdmin(() => '/users?limit=200'),
  'scim-200': asAdmin(() => '/scim/v2/Users?count=200')
}

const options = scenarios[scenario]
if (!options) throw new Error(`unknown scenario ${scenario}`)
const result = await autocannon({ url, duration, connections, ...options })
const { errors, timeouts, non2xx } = result
process.stdout.write(JSON.stringify({ scenario, rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors, timeouts, non2xx, total: result.requests.total }) + '\n')
