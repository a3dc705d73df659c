// The support console: a client of Roster's own API, signed in through /console/session (its tokens kept in cookies
// this script cannot read). What may be done is the API's answer; the page shows the record and asks.
import { html, render, useEffect, useState } from './preact-htm.js'

const HEADERS = { 'x-roster-console': '1' }

class ApiError extends Error {
  constructor (status, problem) {
    super(problem?.detail ?? problem?.title ?? `HTTP ${status}`)
  }
}

let signedOut = () => {}
/** The refresh under way: requests answered 401 together wait for one, since a refresh token is spent by its use. */
let renewing = null
const renew = () => (renewing ??= fetch('/console/session/refresh', { method: 'POST', headers: HEADERS, credentials: 'same-origin' })
  .then((res) => res.ok, () => false).finally(() => { renewing = null }))

/** A request to the API as the signed-in admin; an expired access token is renewed once from the session's refresh. */
async function api (method, path, { body, raw, type } = {}, retried = false) {
  const headers = { ...HEADERS }
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (type) headers['content-type'] = type
  const res = await fetch(path, { method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)), credentials: 'same-origin' })
  if (res.status === 401 && !retried && !path.startsWith('/console/session')) {
    if (await renew()) return api(method, path, { body, raw, type }, true)
    signedOut()
  }
  const text = await res.text()
  const json = text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : undefined
  if (!res.ok) throw new ApiError(res.status, json)
  return json
}

const when = (iso) => iso ? new Date(iso).toLocaleString() : '—'
const quote = (text) => `"${text.replace(/["\\]/g, (c) => `\\${c}`)}"`

/** What the search box holds, as a filter: an expression as it is, else part of an address or of a name. */
function filterOf (query) {
  const q = query.trim()
  if (/\s(eq|ne|co|sw|ew|gt|ge|lt|le|pr)(\s|$)/i.test(q)) return q
  return `email co ${quote(q)} or name co ${quote(q)}`
}

/** The hash route: #/users, #/users/42, #/imports, #/webhooks, #/webhooks/3. */
function useRoute () {
  const [hash, setHash] = useState(location.hash || '#/users')
  useEffect(() => {
    const on = () => setHash(location.hash || '#/users')
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  return hash.slice(2).split('/')
}

function Status ({ message }) {
  return html`<p class=${`status ${message?.error ? 'error' : ''}`} role="status" aria-live="polite">${message?.text ?? ''}</p>`
}

/** Runs an action the admin confirmed, and reports what came of it. */
function useAction (setMessage, reload) {
  return async (question, done, action) => {
    if (question && !confirm(question)) return
    try {
      const result = await action()
      // Told once the page shows what the action left.
      await reload?.()
      setMessage({ text: typeof done === 'function' ? done(result) : done })
    } catch (err) {
      setMessage({ text: err.message, error: true })
    }
  }
}

function SignIn ({ onSignedIn }) {
  const [email, setEmail] = useState('')
  const [secret, setSecret] = useState('')
  const [byCode, setByCode] = useState(false)
  const [message, setMessage] = useState()
  const submit = async (e) => {
    e.preventDefault()
    try {
      const body = byCode ? { email, code: secret } : { email, password: secret }
      const { user } = await api('POST', '/console/session', { body })
      onSignedIn(user)
    } catch (err) {
      setMessage({ text: err.message, error: true })
    }
  }
  const sendCode = async () => {
    try {
      await api('POST', '/auth/email-codes', { body: { email } })
      setByCode(true)
      setMessage({ text: 'If the address may sign in, a code is on its way.' })
    } catch (err) {
      setMessage({ text: err.message, error: true })
    }
  }
  return html`<main id="main" class="signin">
    <h1>Roster console</h1>
    <form onSubmit=${submit}>
      <label for="email">Admin e-mail address</label>
      <input id="email" type="email" autocomplete="username" required value=${email} onInput=${(e) => setEmail(e.target.value)} />
      <label for="secret">${byCode ? 'Code from the e-mail' : 'Password'}</label>
      <input id="secret" type=${byCode ? 'text' : 'password'} autocomplete=${byCode ? 'one-time-code' : 'current-password'} required
        value=${secret} onInput=${(e) => setSecret(e.target.value)} />
      <button type="submit">Sign in</button>
      <button type="button" class="secondary" onClick=${byCode ? () => setByCode(false) : sendCode}>${byCode ? 'Use a password instead' : 'E-mail me a code instead'}</button>
    </form>
    <${Status} message=${message} />
  </main>`
}

function Users () {
  const [query, setQuery] = useState(sessionStorage.getItem('query') ?? '')
  const [found, setFound] = useState()
  const [message, setMessage] = useState()
  const search = async (e) => {
    e?.preventDefault()
    sessionStorage.setItem('query', query)
    try {
      const page = await api('GET', `/users?limit=50&filter=${encodeURIComponent(filterOf(query))}`)
      setFound(page.items)
      setMessage({ text: `${page.items.length}${page.next ? '+' : ''} found` })
    } catch (err) {
      setMessage({ text: err.message, error: true })
    }
  }
  useEffect(() => { if (query) search() }, [])
  return html`<section aria-labelledby="users-h">
    <h1 id="users-h">Users</h1>
    <form class="search" role="search" onSubmit=${search}>
      <label for="q">Part of an address or a name, or a filter (<code>status eq "BANNED"</code>)</label>
      <div class="row">
        <input id="q" type="search" required value=${query} onInput=${(e) => setQuery(e.target.value)} />
        <button type="submit">Find</button>
      </div>
    </form>
    <${Status} message=${message} />
    ${found && html`<div class="scroll"><table>
      <thead><tr><th scope="col">Name</th><th scope="col">Address</th><th scope="col">Status</th><th scope="col">Role</th></tr></thead>
      <tbody>${found.map((u) => html`<tr key=${u.id}>
        <td><a href=${`#/users/${u.id}`}>${u.name}</a></td><td>${u.email ?? '—'}</td>
        <td>${u.status}${u.deletion_scheduled_at ? ' (deletion scheduled)' : ''}</td><td>${u.role}</td>
      </tr>`)}</tbody>
    </table></div>`}
  </section>`
}

/** Why a user may not sign in, as its record says it. */
function signInFacts (user, emails, events) {
  const facts = []
  if (user.ban) facts.push(`Banned${user.ban.until ? ` until ${when(user.ban.until)}` : ''}${user.ban.reason ? `: ${user.ban.reason}` : ''}.`)
  if (user.deletion_scheduled_at) facts.push(`Its deletion is scheduled for ${when(user.deletion_scheduled_at)}; it cannot sign in until restored.`)
  if (!emails.some((e) => e.primary || e.verified)) facts.push('It has no address it may sign in with.')
  const failed = events.filter((e) => e.type === 'login.failed').length
  if (failed) facts.push(`${failed} failed sign-in${failed > 1 ? 's' : ''} among its recent events.`)
  return facts.length ? facts : ['Nothing in its record keeps it from signing in.']
}

function User ({ id }) {
  const [state, setState] = useState()
  const [message, setMessage] = useState()
  const [ban, setBan] = useState({ reason: '', until: '' })
  const [metadata, setMetadata] = useState()
  const load = async () => {
    try {
      const [user, emails, sessions, events, meta] = await Promise.all([
        api('GET', `/users/${id}`), api('GET', `/users/${id}/emails?limit=100`), api('GET', `/users/${id}/sessions?limit=100`),
        api('GET', `/users/${id}/events?limit=20`), api('GET', `/users/${id}/metadata`)
      ])
      setState({ user, emails: emails.items, sessions: sessions.items, events: events.items })
      const shown = (part) => JSON.stringify(meta[part] ?? {}, null, 2)
      setMetadata({ public: shown('public'), private: shown('private'), unsafe: shown('unsafe') })
    } catch (err) {
      setMessage({ text: err.message, error: true })
    }
  }
  useEffect(() => { load() }, [id])
  const act = useAction(setMessage, load)
  if (!state) return html`<section><h1>User ${id}</h1><${Status} message=${message ?? { text: 'Loading…' }} /></section>`
  const { user, emails, sessions, events } = state
  const setBanned = (e) => {
    e.preventDefault()
    const body = { status: 'BANNED', ...(ban.reason ? { reason: ban.reason } : {}), ...(ban.until ? { until: new Date(ban.until).toISOString() } : {}) }
    act(`Ban ${user.name}${ban.until ? ` until ${when(body.until)}` : ''}?`, 'Banned.', () => api('PUT', `/users/${id}/status`, { body }))
  }
  const saveMetadata = (e) => {
    e.preventDefault()
    act('Save the metadata?', 'Metadata saved.', () => {
      const parse = (part) => { try { return JSON.parse(metadata[part] || '{}') } catch { throw new Error(`The ${part} part is not JSON`) } }
      return api('PUT', `/users/${id}/metadata`, { body: { public: parse('public'), private: parse('private'), unsafe: parse('unsafe') } })
    })
  }
  return html`<section aria-labelledby="user-h">
    <p><a href="#/users">← Users</a></p>
    <h1 id="user-h">${user.name}</h1>
    <${Status} message=${message} />
    <dl class="facts">
      <dt>Id</dt><dd>${user.id}</dd><dt>Address</dt><dd>${user.email ?? '—'}</dd>
      <dt>Status</dt><dd>${user.status}</dd><dt>Role</dt><dd>${user.role}</dd>
      <dt>Created</dt><dd>${when(user.created_at)}</dd>
      ${user.deletion_scheduled_at && html`<dt>Deletion</dt><dd>scheduled for ${when(user.deletion_scheduled_at)}</dd>`}
    </dl>
    <h2>Signing in</h2>
    <ul class="why">${signInFacts(user, emails, events).map((fact) => html`<li>${fact}</li>`)}</ul>

    <h2>Support actions</h2>
    <div class="actions">
      ${user.ban
        ? html`<button onClick=${() => act(`Lift the ban of ${user.name}?`, 'Ban lifted.', () => api('PUT', `/users/${id}/status`, { body: { status: 'ACTIVE' } }))}>Lift the ban</button>`
        : html`<form class="inline" onSubmit=${setBanned}>
            <label for="ban-reason">Reason</label><input id="ban-reason" value=${ban.reason} onInput=${(e) => setBan({ ...ban, reason: e.target.value })} />
            <label for="ban-until">Until (optional)</label><input id="ban-until" type="datetime-local" value=${ban.until} onInput=${(e) => setBan({ ...ban, until: e.target.value })} />
            <button type="submit">Ban</button>
          </form>`}
      <button onClick=${() => act(`End every session of ${user.name}?`, 'Every session ended.', () => api('DELETE', `/users/${id}/sessions`))}>End every session</button>
      <button onClick=${() => act(`Make ${user.name} ${user.role === 'admin' ? 'a user' : 'an admin'}?`, 'Role changed.',
        () => api('PUT', `/users/${id}/role`, { body: { role: user.role === 'admin' ? 'user' : 'admin' } }))}>${user.role === 'admin' ? 'Make a user' : 'Make an admin'}</button>
      ${user.deletion_scheduled_at
        ? html`<button onClick=${() => act(`Restore ${user.name}?`, 'Restored.', () => api('POST', `/users/${id}/restore`))}>Restore</button>`
        : html`<button class="danger" onClick=${() => act(`Delete ${user.name}? This forgets the user.`,
            (scheduled) => scheduled ? `Deletion scheduled for ${when(scheduled.deletion_scheduled_at)}.` : 'Deleted.',
            async () => {
              const scheduled = await api('DELETE', `/users/${id}`)
              // Gone at once: nothing is left to show here.
              if (!scheduled) location.hash = '#/users'
              return scheduled
            })}>Delete</button>`}
    </div>

    <h2>Addresses</h2>
    <div class="scroll"><table>
      <thead><tr><th scope="col">Address</th><th scope="col">Primary</th><th scope="col">Verified</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
      <tbody>${emails.map((e) => html`<tr key=${e.id}>
        <td>${e.address}</td><td>${e.primary ? 'primary' : ''}</td><td>${e.verified ? `✓ ${when(e.verified_at)}` : 'not verified'}</td>
        <td>${!e.verified && html`<button onClick=${() => act(`Send a verification mail to ${e.address}?`, `Verification sent to ${e.address}.`,
          () => api('POST', `/users/${id}/emails/${e.id}/verification`))}>Resend verification</button>`}</td>
      </tr>`)}</tbody>
    </table></div>

    <h2>Sessions</h2>
    ${sessions.length === 0 ? html`<p>No live session.</p>` : html`<div class="scroll"><table>
      <thead><tr><th scope="col">Client</th><th scope="col">Started</th><th scope="col">Last used</th></tr></thead>
      <tbody>${sessions.map((s) => html`<tr key=${s.id}><td>${s.client || '—'}</td><td>${when(s.created_at)}</td><td>${when(s.last_used_at)}</td></tr>`)}</tbody>
    </table></div>`}

    <h2>Metadata</h2>
    <form class="metadata" onSubmit=${saveMetadata}>
      ${['public', 'private', 'unsafe'].map((part) => html`<label for=${`meta-${part}`}>${part}</label>
        <textarea id=${`meta-${part}`} rows="4" value=${metadata?.[part]} onInput=${(e) => setMetadata({ ...metadata, [part]: e.target.value })}></textarea>`)}
      <button type="submit">Save metadata</button>
    </form>

    <h2>Recent activity</h2>
    <ol class="events">${events.map((e) => html`<li key=${e.id}><strong>${e.type}</strong> ${when(e.occurred_at)} by ${e.actor.type}${e.actor.id ? ` ${e.actor.id}` : ''}</li>`)}</ol>
  </section>`
}

function Imports () {
  const [list, setList] = useState([])
  const [job, setJob] = useState()
  const [errors, setErrors] = useState([])
  const [message, setMessage] = useState()
  const load = async () => setList((await api('GET', '/imports?limit=20')).items)
  useEffect(() => { load().catch((err) => setMessage({ text: err.message, error: true })) }, [])
  const follow = async (id) => {
    for (;;) {
      const current = await api('GET', `/imports/${id}`)
      setJob(current)
      if (current.status === 'succeeded' || current.status === 'failed') {
        setErrors((await api('GET', `/imports/${id}/errors?limit=200`)).items)
        setMessage({ text: `Import ${id} ${current.status}.` })
        await load()
        return
      }
      await new Promise((resolve) => setTimeout(resolve, 500))
    }
  }
  const start = async (e) => {
    e.preventDefault()
    const form = new FormData(e.target)
    const file = form.get('file')
    if (!confirm(`Import ${file.name}?`)) return
    const query = new URLSearchParams({ format: form.get('format'), on_conflict: form.get('on_conflict'), dry_run: form.get('dry_run') ? 'true' : 'false' })
    try {
      setErrors([])
      const started = await api('POST', `/imports?${query}`, { raw: file, type: form.get('format') === 'roster' ? 'application/x-ndjson' : 'application/json' })
      setMessage({ text: `Import ${started.id} started.` })
      await follow(started.id)
    } catch (err) {
      setMessage({ text: err.message, error: true })
    }
  }
  const done = job ? job.processed : 0
  return html`<section aria-labelledby="imports-h">
    <h1 id="imports-h">Imports</h1>
    <form class="import" onSubmit=${start}>
      <label for="file">File</label><input id="file" name="file" type="file" required />
      <label for="format">Format</label>
      <select id="format" name="format"><option value="roster">Roster (NDJSON)</option><option value="auth0">Auth0 (JSON)</option><option value="firebase">Firebase (JSON)</option></select>
      <label for="on_conflict">When a user is here already</label>
      <select id="on_conflict" name="on_conflict"><option value="skip">skip it</option><option value="update">update it</option></select>
      <label class="check"><input name="dry_run" type="checkbox" /> Dry run: check every line, write nothing</label>
      <button type="submit">Start the import</button>
    </form>
    <${Status} message=${message} />
    ${job && html`<div class="progress">
      <label for="progress">Import ${job.id}: ${job.status}, ${done} of ${job.lines ?? '?'} lines</label>
      <progress id="progress" max=${job.lines || 1} value=${done}></progress>
      <p>${job.created} created, ${job.updated} updated, ${job.skipped} skipped, ${job.failed} failed</p>
    </div>`}
    ${errors.length > 0 && html`<h2>Lines that failed</h2><div class="scroll"><table>
      <thead><tr><th scope="col">Line</th><th scope="col">Code</th><th scope="col">Detail</th></tr></thead>
      <tbody>${errors.map((e) => html`<tr key=${e.line}><td>${e.line}</td><td>${e.code}</td><td>${e.detail}</td></tr>`)}</tbody>
    </table></div>`}
    <h2>Recent imports</h2>
    <ul>${list.map((i) => html`<li key=${i.id}>Import ${i.id}: ${i.status}, ${i.processed} lines, ${i.failed} failed (${when(i.created_at)})</li>`)}</ul>
  </section>`
}

function Webhooks ({ id }) {
  const [hooks, setHooks] = useState([])
  const [deliveries, setDeliveries] = useState([])
  const [message, setMessage] = useState()
  const load = async () => {
    setHooks((await api('GET', '/webhooks?limit=100')).items)
    if (id) setDeliveries((await api('GET', `/webhooks/${id}/deliveries?limit=50`)).items)
  }
  useEffect(() => { load().catch((err) => setMessage({ text: err.message, error: true })) }, [id])
  const act = useAction(setMessage, load)
  return html`<section aria-labelledby="hooks-h">
    <h1 id="hooks-h">Webhooks</h1>
    <${Status} message=${message} />
    <ul>${hooks.map((h) => html`<li key=${h.id}><a href=${`#/webhooks/${h.id}`}>${h.url}</a> ${h.enabled ? '' : `(disabled${h.disabled_reason ? `: ${h.disabled_reason}` : ''})`}</li>`)}</ul>
    ${id && html`<h2>Deliveries of webhook ${id}</h2><div class="scroll"><table>
      <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last error</th><th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
      <tbody>${deliveries.map((d) => html`<tr key=${d.id}>
        <td>${d.event_type}</td><td>${d.status}${d.last_status_code ? ` (${d.last_status_code})` : ''}</td><td>${d.attempts}</td><td>${d.last_error ?? ''}</td>
        <td><button onClick=${() => act(`Send delivery ${d.id} again?`, `Delivery ${d.id} sent again.`,
          () => api('POST', `/webhooks/${id}/deliveries/${d.id}/retry`))}>Retry</button></td>
      </tr>`)}</tbody>
    </table></div>`}
  </section>`
}

function Console () {
  const [admin, setAdmin] = useState(null)
  const [checked, setChecked] = useState(false)
  const route = useRoute()
  signedOut = () => setAdmin(null)
  useEffect(() => {
    // A session left from an earlier visit goes on: its access token is tried first, the refresh only once it expired,
    // so that two quick reloads never present one refresh token twice (which would end the session).
    api('GET', '/users?limit=1').then(() => setAdmin({}), () => undefined).finally(() => setChecked(true))
  }, [])
  if (!checked) return html`<p class="loading">Loading the console…</p>`
  if (!admin) return html`<${SignIn} onSignedIn=${setAdmin} />`
  const [section, id] = route
  const signOut = async () => {
    await api('DELETE', '/console/session').catch(() => undefined)
    setAdmin(null)
  }
  const view = section === 'imports' ? html`<${Imports} />`
    : section === 'webhooks' ? html`<${Webhooks} id=${id} />`
      : id ? html`<${User} id=${id} key=${id} />` : html`<${Users} />`
  return html`<a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById('main').focus() }}>Skip to content</a>
    <header>
      <nav aria-label="Sections">
        <a href="#/users" aria-current=${section === 'users' ? 'page' : undefined}>Users</a>
        <a href="#/imports" aria-current=${section === 'imports' ? 'page' : undefined}>Imports</a>
        <a href="#/webhooks" aria-current=${section === 'webhooks' ? 'page' : undefined}>Webhooks</a>
      </nav>
      <button class="secondary" onClick=${signOut}>Sign out</button>
    </header>
    <main id="main" tabindex="-1">${view}</main>`
}

render(html`<${Console} />`, document.getElementById('app'))
