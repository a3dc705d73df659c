import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import puppeteer, { type Page } from 'puppeteer-core'
import t from 'tap'
import { ADMIN, tempDir } from '../helpers.js'
import { call, signUp, startBuilt } from '../blackbox/service.js'

/**
 * The support console in a real headless browser (Debian's chromium), against the built service as `npm start` runs
 * it: an admin signs in, finds a user by part of its address by keyboard alone, sees why it cannot sign in, lifts its
 * ban and sets one with an end, resends a verification, ends its sessions, imports a file of 1,000 users following it
 * to the end, and sends a webhook delivery again; at a desktop's width and a phone's, with no serious accessibility
 * violation (axe-core), no script error, no request refused by the CSP and none to another origin. Screenshots are
 * kept in .tap/screenshots/.
 */
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((path) => existsSync(path))
const DESKTOP = { width: 1280, height: 900 }
const PHONE = { width: 390, height: 844, isMobile: true, hasTouch: true }
const SHOTS = '.tap/screenshots'
const AXE = readFileSync(new URL(import.meta.resolve('axe-core/axe.min.js')), 'utf8')

/** The serious and critical violations axe-core finds on the page as it is. */
async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE)
  const result = await page.evaluate(async () => {
    const run = (globalThis as unknown as { axe: { run: () => Promise<{ violations: Array<{ id: string; impact: string; nodes: unknown[] }> }> } }).axe.run
    return (await run()).violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length }))
  })
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} (${v.impact}, ${v.nodes} nodes)`)
}

/** Presses Tab until `selector` has the focus: what a keyboard user does. */
async function tabTo(page: Page, selector: string): Promise<void> {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press('Tab')
    if (await page.$eval(':focus', (el, s) => el.matches(s), selector).catch(() => false)) return
  }
  throw new Error(`Tab never reached ${selector}`)
}

const textOf = (page: Page, selector: string) => page.$eval(selector, (el) => (el as unknown as { innerText: string }).innerText)

async function waitForText(page: Page, selector: string, text: string | RegExp, timeout = 15_000): Promise<void> {
  const pattern = typeof text === 'string' ? text : text.source
  await waitForFunction(page, selector, pattern, text, timeout).catch(async (err: unknown) => {
    const shown = await page.$eval(selector, (el) => el.textContent).catch(async () => `nothing; the page: ${await textOf(page, 'body').catch(() => '')}`)
    throw new Error(`${selector} never showed ${String(text)}: it shows "${shown}" (${String(err)})`)
  })
}

function waitForFunction(page: Page, selector: string, pattern: string, text: string | RegExp, timeout: number) {
  return page.waitForFunction((s, p) => new RegExp(p).test((globalThis as unknown as { document: { querySelector: (s: string) => { textContent: string | null } | null } }).document.querySelector(s)?.textContent ?? ''),
    { timeout }, selector, typeof text === 'string' ? text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : pattern)
}

t.test('the console, by a person who never saw it, on a desktop and a phone', { skip: !CHROMIUM && process.env.REQUIRE_BROWSER !== '1' && 'no chromium here (CI installs it; REQUIRE_BROWSER=1 makes its absence a failure)' }, async (t) => {
  if (!CHROMIUM) {
    t.fail('REQUIRE_BROWSER=1 and no chromium is installed')
    return
  }
  const received: string[] = []
  const receiver = http.createServer((req, res) => { req.resume(); req.on('end', () => { received.push(String(req.headers['webhook-id'])); res.writeHead(204).end() }) })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
  t.teardown(() => receiver.close())
  const service = await startBuilt(t, {
    WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', VERIFICATION_RESEND_SECONDS: '1', ACCOUNT_DELETION_GRACE_SECONDS: '3600'
  })
  const login = await call(service, 'POST', '/auth/tokens', { body: { email: ADMIN.email, password: ADMIN.password } })
  const admin = { authorization: `Bearer ${String(login.body.token)}` }
  /** A support case: a user banned until tomorrow, with a second address never verified, and a live session. */
  const supportCase = async (name: string) => {
    const user = await signUp(service, `${name}@example.com`)
    await call(service, 'POST', `/users/${user.id}/emails`, { headers: user.auth, body: { address: `${name}.second@example.com` } })
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString()
    await call(service, 'PUT', `/users/${user.id}/status`, { headers: admin, body: { status: 'BANNED', reason: 'chargeback', until: tomorrow } })
    return user
  }
  const cases = { desktop: await supportCase('support.desk'), phone: await supportCase('support.phone') }
  await signUp(service, 'support.other@example.com')
  const hook = await call(service, 'POST', '/webhooks', { headers: admin, body: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, events: ['user.*'] } })
  await signUp(service, 'hooked@example.com')

  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  await page.setViewport(DESKTOP)
  const problems: string[] = []
  page.on('pageerror', (err) => problems.push(`script error: ${String(err)}`))
  page.on('console', (message) => { if (message.type() === 'error' && !/status of 40[13]/.test(message.text())) problems.push(`console: ${message.text()}`) })
  // A request cut short by a navigation of the test's own (a reload to emulate a phone) is no failure of the page.
  page.on('requestfailed', (request) => {
    if (request.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`${request.method()} ${request.url()} failed (${request.failure()?.errorText ?? '?'})`)
  })
  // data: URLs are the browser's own (the date picker's icon), not requests to an origin.
  page.on('request', (request) => {
    if (!request.url().startsWith(service.base) && !request.url().startsWith('data:')) problems.push(`a request to another origin: ${request.url()}`)
  })
  await page.evaluateOnNewDocument(() => {
    type Violation = { violatedDirective: string; blockedURI: string }
    const w = globalThis as unknown as { cspViolations: string[]; addEventListener: (type: string, on: (e: Violation) => void) => void }
    w.cspViolations = []
    w.addEventListener('securitypolicyviolation', (e) => w.cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`))
  })
  page.on('dialog', (dialog) => { void dialog.accept() })
  mkdirSync(SHOTS, { recursive: true })
  /** A new size; emulating a phone or leaving it reloads the page, which is waited for. */
  const resize = async (viewport: typeof DESKTOP | typeof PHONE) => {
    await page.setViewport(viewport)
    await page.waitForNetworkIdle()
    await page.waitForSelector('nav, #email')
  }
  const shot = async (name: string) => { await page.screenshot({ path: join(SHOTS, `console-${name}.png`), fullPage: true }) }

  // Sign-in, then the search, by keyboard alone.
  await page.goto(`${service.base}/console`, { waitUntil: 'networkidle0' })
  t.match(await page.title(), /Roster console/)
  t.same(await axeViolations(page), [], 'the sign-in page: no serious accessibility violation')
  await shot('sign-in-desktop')
  await tabTo(page, '#email')
  await page.keyboard.type(ADMIN.email)
  await page.keyboard.press('Tab')
  await page.keyboard.type(ADMIN.password)
  await page.keyboard.press('Enter')
  await page.waitForSelector('#q')
  const cookies = await page.cookies()
  t.ok(cookies.length > 0 && cookies.every((c) => c.httpOnly && c.sameSite === 'Strict'), 'the session lives in HttpOnly, SameSite=Strict cookies')
  t.equal(await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie), '', 'which no script can read')

  const clickButton = async (label: string) => {
    const [button] = await page.$$(`xpath/.//button[normalize-space()="${label}"]`)
    if (!button) throw new Error(`no button ${label}`)
    await button.click()
  }
  /** What support does for one user, found by part of its address, by keyboard, at the page's size now. */
  const support = async (size: 'desktop' | 'phone', user: { id: number }) => {
    const name = `support.${size === 'desktop' ? 'desk' : 'phone'}`
    await tabTo(page, '#q')
    // The box keeps the last search: it is replaced, as a person selects it all and types.
    await page.keyboard.down('Control')
    await page.keyboard.press('KeyA')
    await page.keyboard.up('Control')
    await page.keyboard.type(`support.${size.slice(0, 4)}`)
    await page.keyboard.press('Enter')
    await waitForText(page, 'table', `${name}@example.com`)
    await tabTo(page, `a[href="#/users/${user.id}"]`)
    await page.keyboard.press('Enter')
    await waitForText(page, '.why', 'chargeback')
    t.match(await textOf(page, '.why'), /Banned until .*: chargeback/, `${size}: why it cannot sign in: the ban, its end and its reason`)
    t.same(await axeViolations(page), [], `${size}: the user page: no serious accessibility violation`)
    await shot(`user-${size}`)

    // The support actions, each confirmed, each written as the API writes it.
    await clickButton('Lift the ban')
    await waitForText(page, '.status', 'Ban lifted.')
    let read = await call(service, 'GET', `/users/${user.id}`, { headers: admin })
    t.equal(read.body.status, 'ACTIVE', 'the ban is lifted')

    // Unbanned, it signs in on a device of its own; support then ends every session it has.
    t.equal((await call(service, 'POST', '/auth/tokens', { body: { email: `${name}@example.com`, password: 'password-123' } })).status, 201)
    await page.reload({ waitUntil: 'networkidle0' })
    await page.waitForSelector('.why')
    t.ok(((await call(service, 'GET', `/users/${user.id}/sessions`, { headers: admin })).body.items as unknown[]).length >= 1, 'it has a session to end')
    await clickButton('End every session')
    await waitForText(page, '.status', 'Every session ended.')
    t.same((await call(service, 'GET', `/users/${user.id}/sessions`, { headers: admin })).body.items, [], 'no session is left')

    const until = new Date(Date.now() + 3 * 86_400_000)
    const local = new Date(until.getTime() - until.getTimezoneOffset() * 60_000).toISOString().slice(0, 16)
    await page.waitForSelector('#ban-reason')
    await page.type('#ban-reason', 'cooling off')
    await page.$eval('#ban-until', (el, value) => {
      const input = el as unknown as { value: string; dispatchEvent: (e: unknown) => void }
      input.value = value
      input.dispatchEvent(new (globalThis as unknown as { Event: new (type: string, init: object) => unknown }).Event('input', { bubbles: true }))
    }, local)
    await clickButton('Ban')
    await waitForText(page, '.status', 'Banned.')
    read = await call(service, 'GET', `/users/${user.id}`, { headers: admin })
    t.match(read.body, { status: 'BANNED', ban: { reason: 'cooling off', by: { type: 'admin' } } }, 'banned again, by the admin, with a reason')
    t.ok(Math.abs(Date.parse(String((read.body.ban as { until: string }).until)) - until.getTime()) < 60_000, 'and its end')

    await new Promise((resolve) => setTimeout(resolve, 1_100))
    await clickButton('Resend verification')
    await waitForText(page, '.status', `Verification sent to ${name}@example.com.`)

    const events = (await call(service, 'GET', `/events?user_id=${user.id}&type=user.status_changed&type=session.ended&limit=50`, { headers: admin })).body.items as Array<{ type: string; actor: { type: string } }>
    t.ok(events.filter((e) => e.type === 'user.status_changed').length >= 3, 'each status change has its event')
    t.ok(events.filter((e) => e.actor.type === 'admin').length >= 3, 'with the admin as actor')
  }
  await support('desktop', cases.desktop)
  const user = cases.desktop

  // The rest of support's actions: metadata, the role, a deletion and its restore.
  await page.$eval('#meta-public', (el) => {
    const area = el as unknown as { value: string; dispatchEvent: (e: unknown) => void }
    area.value = '{ "plan": "gold" }'
    area.dispatchEvent(new (globalThis as unknown as { Event: new (type: string, init: object) => unknown }).Event('input', { bubbles: true }))
  })
  await clickButton('Save metadata')
  await waitForText(page, '.status', 'Metadata saved.')
  t.same((await call(service, 'GET', `/users/${user.id}/metadata`, { headers: admin })).body.public, { plan: 'gold' }, 'metadata saved')
  await clickButton('Make an admin')
  await waitForText(page, '.status', 'Role changed.')
  t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: admin })).body.role, 'admin')
  await clickButton('Make a user')
  await page.waitForSelector('xpath/.//button[normalize-space()="Make an admin"]')
  t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: admin })).body.role, 'user', 'and back')
  await clickButton('Delete')
  await waitForText(page, '.status', 'Deletion scheduled for')
  await waitForText(page, '.facts', 'scheduled for')
  t.ok((await call(service, 'GET', `/users/${user.id}`, { headers: admin })).body.deletion_scheduled_at, 'its deletion is scheduled')
  await clickButton('Restore')
  await waitForText(page, '.status', 'Restored.')
  t.equal((await call(service, 'GET', `/users/${user.id}`, { headers: admin })).body.deletion_scheduled_at, null, 'and restored')

  // On a phone's screen: the same flow, nothing wider than the screen.
  await resize(PHONE)
  await page.goto(`${service.base}/console#/users`, { waitUntil: 'networkidle0' })
  await page.waitForSelector('#q')
  await support('phone', cases.phone)
  t.ok(await page.$eval('html', (el) => el.scrollWidth) <= PHONE.width, 'nothing is wider than a 390 px screen')
  await page.click('nav a[href="#/users"]')
  await waitForText(page, 'table', 'support.phone@example.com')
  t.ok(await page.$eval('html', (el) => el.scrollWidth) <= PHONE.width, 'the search fits a phone too')
  await shot('users-phone')

  // An import of 1,000 users (and one bad line), followed to its end, on each screen.
  const dir = tempDir(t)
  for (const [size, viewport] of [['desktop', DESKTOP], ['phone', PHONE]] as const) {
    await resize(viewport)
    const file = join(dir, `users-${size}.ndjson`)
    writeFileSync(file, Array.from({ length: 1000 }, (_, i) => JSON.stringify({ email: `imported-${size}-${i}@example.com`, name: `Imported ${i}` })).join('\n') + '\n{"email": "broken\n')
    await page.goto(`${service.base}/console#/imports`, { waitUntil: 'networkidle0' })
    const input = await page.waitForSelector('#file')
    await (input as unknown as { uploadFile: (path: string) => Promise<void> }).uploadFile(file)
    await clickButton('Start the import')
    await waitForText(page, '.status', /Import \d+ succeeded\./, 60_000)
    t.match(await textOf(page, '.progress'), /1001 of 1001 lines/, `${size}: followed to the end`)
    t.match(await textOf(page, '.progress'), /1000 created, 0 updated, 0 skipped, 1 failed/)
    t.match(await textOf(page, 'table'), /1001\s+INVALID_LINE/, 'with the line that failed')
    t.same(await axeViolations(page), [], `${size}: the imports page: no serious accessibility violation`)
    t.ok(await page.$eval('html', (el) => el.scrollWidth) <= viewport.width, `${size}: nothing wider than the screen`)
    await shot(`imports-${size}`)
  }
  await resize(DESKTOP)

  // A webhook's deliveries, and one sent again.
  const hookId = Number(hook.body.id)
  await page.click('nav a[href="#/webhooks"]')
  await page.waitForSelector(`a[href="#/webhooks/${hookId}"]`)
  await page.click(`a[href="#/webhooks/${hookId}"]`)
  await waitForText(page, 'table', 'user.created')
  const before = received.length
  await clickButton('Retry')
  await waitForText(page, '.status', /Delivery \d+ sent again\./)
  for (let i = 0; i < 100 && received.length === before; i++) await new Promise((resolve) => setTimeout(resolve, 50))
  t.ok(received.length > before, 'the receiver got it again')
  t.same(await axeViolations(page), [], 'the webhooks page: no serious accessibility violation')
  await shot('webhooks-desktop')

  const violations = await page.evaluate(() => (globalThis as unknown as { cspViolations: string[] }).cspViolations)
  t.same(violations, [], 'no request refused by the Content Security Policy')
  t.same(problems, [], 'no script error, no failed request, nothing fetched from another origin')
  t.ok(service.running(), 'the same process is still running')
})
