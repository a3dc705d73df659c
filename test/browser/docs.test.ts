import { existsSync } from 'node:fs'
import puppeteer, { type Page } from 'puppeteer-core'
import t from 'tap'
import { startBuilt } from '../blackbox/service.js'

/**
 * The /docs page in a real headless browser (Debian's chromium), against the built service as `npm start` runs it: a
 * newcomer signs up, logs in, authorizes, reads themself and lists users through the page's "Try it out", from
 * `127.0.0.1` and from `localhost` alike (the document's server is relative, so neither is a CORS failure), with no
 * field pre-filled that would make the next request fail; and each long operation, opened, fits in two screens.
 */
const CHROMIUM = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].find((path) => existsSync(path))

/** The screen the page is read on: a laptop's. */
const SCREEN = { width: 1280, height: 900 }

/** The operations named when each was three to six screens long, and the longest since. */
const LONGEST: Array<[string, string]> = [
  ['users', 'getUser'], ['users', 'createUser'], ['auth', 'createToken'], ['users', 'listUsers'], ['emails', 'setUserPrimaryEmail']
]

/** The operation's block, opened with "Try it out" pressed. */
async function tryOut(page: Page, tag: string, operationId: string): Promise<string> {
  const block = `#operations-${tag}-${operationId}`
  await page.waitForSelector(`${block} .opblock-summary`)
  await page.click(`${block} .opblock-summary`)
  await page.waitForSelector(`${block} .try-out__btn`)
  await page.click(`${block} .try-out__btn`)
  return block
}

/**
 * Puts `text` in a field as a paste would: selected whole, replaced by one input event (the page's React state follows
 * input events, not values; typed key by key, each re-renders the operation).
 */
async function typeInto(page: Page, selector: string, text: string): Promise<void> {
  await page.waitForSelector(selector)
  await page.click(selector)
  await page.keyboard.down('Control')
  await page.keyboard.press('KeyA')
  await page.keyboard.up('Control')
  // Run in the page, where `document` is the page's own.
  await page.evaluate((value) => (globalThis as unknown as { document: { execCommand: (command: string, ui: boolean, value: string) => boolean } }).document.execCommand('insertText', false, value), text)
}

/** Presses Execute and reads the live answer: its status and its body. */
async function execute(page: Page, block: string): Promise<{ status: number; body: string }> {
  await page.click(`${block} .execute`)
  const status = `${block} .live-responses-table .response .response-col_status`
  await page.waitForSelector(status, { timeout: 15_000 })
  return page.$eval(block, (el) => ({
    status: Number(el.querySelector('.live-responses-table .response .response-col_status')?.textContent?.trim().slice(0, 3)),
    body: el.querySelector('.live-responses-table .response .highlight-code pre')?.textContent ?? ''
  }))
}

t.test('through /docs in a browser, from 127.0.0.1 and from localhost: sign up, log in, authorize, read self', { skip: !CHROMIUM && process.env.REQUIRE_BROWSER !== '1' && 'no chromium here (CI installs it; REQUIRE_BROWSER=1 makes its absence a failure)' }, async (t) => {
  if (!CHROMIUM) {
    t.fail('REQUIRE_BROWSER=1 and no chromium is installed')
    return
  }
  const service = await startBuilt(t)
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
  t.teardown(() => browser.close())
  const problems: string[] = []

  for (const host of ['127.0.0.1', 'localhost']) {
    const page = await browser.newPage()
    await page.setViewport(SCREEN)
    page.on('pageerror', (err) => problems.push(`${host}: ${String(err)}`))
    page.on('requestfailed', (request) => problems.push(`${host}: ${request.method()} ${request.url()} failed (${request.failure()?.errorText ?? '?'})`))
    await page.goto(`http://${host}:${service.port}/docs`, { waitUntil: 'load' })
    t.match(await page.title(), /^Roster /, `${host}: the product's name, not the framework's`)

    const email = `browser-${host.replace(/\W/g, '')}@example.com`
    const signUp = await tryOut(page, 'users', 'createUser')
    t.equal(await page.$eval(`${signUp} tr[data-param-name="Idempotency-Key"] input`, (el) => (el as unknown as { value: string }).value), '', `${host}: no Idempotency-Key pre-filled`)
    await typeInto(page, `${signUp} textarea.body-param__text`, JSON.stringify({ name: 'Ada', email, password: 'correct-horse' }))
    const created = await execute(page, signUp)
    t.equal(created.status, 201, `${host}: signed up (${created.body.slice(0, 200)})`)
    const id = (JSON.parse(created.body) as { id: number }).id

    const logIn = await tryOut(page, 'auth', 'createToken')
    await typeInto(page, `${logIn} textarea.body-param__text`, JSON.stringify({ email, password: 'correct-horse' }))
    const tokens = await execute(page, logIn)
    t.equal(tokens.status, 201, `${host}: logged in (${tokens.body.slice(0, 200)})`)
    const token = (JSON.parse(tokens.body) as { token: string }).token

    await page.click('.auth-wrapper .authorize')
    await typeInto(page, '.modal-ux .auth-container input', token)
    await page.click('.modal-ux .modal-btn.authorize')
    await page.click('.modal-ux .btn-done')

    const read = await tryOut(page, 'users', 'getUser')
    const field = `${read} tr[data-param-name="user_id"] input`
    t.equal(await page.$eval(field, (el) => (el as unknown as { value: string }).value), '', `${host}: no id pre-filled`)
    await typeInto(page, field, String(id))
    const self = await execute(page, read)
    t.equal(self.status, 200, `${host}: read self (${self.body.slice(0, 200)})`)
    t.match(self.body, email, `${host}: the page shows the user`)

    // No filter is pre-filled either: listing users as this user finds this user.
    const list = await tryOut(page, 'users', 'listUsers')
    const filled = await page.$$eval(`${list} table.parameters tbody > tr`, (rows) => rows.flatMap((row) =>
      [...row.querySelectorAll('input')].filter((input) => input.value !== '').map((input) => `${row.getAttribute('data-param-name') ?? '?'}=${input.value}`)))
    t.same(filled.filter((field) => !field.startsWith('limit=')), [], `${host}: no filter pre-filled (${filled.join(', ')})`)
    const listed = await execute(page, list)
    t.equal(listed.status, 200, `${host}: listed users`)
    t.match(listed.body, email, `${host}: and found the user`)
    await page.close()
  }

  // Each operation opened fits in two screens: an error response is one line until it is unfolded, headers are folded.
  const page = await browser.newPage()
  await page.setViewport(SCREEN)
  await page.goto(`http://127.0.0.1:${service.port}/docs`, { waitUntil: 'load' })
  for (const [tag, operationId] of LONGEST) {
    const block = `#operations-${tag}-${operationId}`
    await page.waitForSelector(`${block} .opblock-summary`)
    await page.click(`${block} .opblock-summary`)
    await page.waitForSelector(`${block} .responses-wrapper`)
    const height = await page.$eval(block, (el) => Math.round(el.getBoundingClientRect().height))
    // Two screens, and a row for listUsers' filter expression beside its field filters.
    t.ok(height <= 2 * SCREEN.height + 80, `${operationId}: ${height} px open, within two screens of ${SCREEN.height} px and a row`)
    if (operationId !== 'createUser') continue
    // What is folded is one click away: the 409's example and schema, and its headers.
    const conflict = `${block} tr.response[data-code="409"]`
    t.equal(await page.$eval(conflict, (el) => el.querySelector('.model-example') === null), true, 'a 409 is one line')
    await page.click(`${conflict} .roster-unfold`)
    await page.waitForSelector(`${conflict} .model-example`)
    t.match(await page.$eval(`${conflict} .model-example`, (el) => el.textContent ?? ''), 'EMAIL_TAKEN', 'unfolded, it shows its example')
    t.match(await page.$eval(`${conflict} details.roster-headers > summary`, (el) => el.textContent ?? ''), /^Headers \(\d+\)$/, 'and its headers, folded')
    await page.click(`${conflict} details.roster-headers > summary`)
    t.match(await page.$eval(`${conflict} details.roster-headers table`, (el) => (el as unknown as { innerText: string }).innerText), 'RateLimit-Policy', 'a click away')
  }
  await page.close()
  t.same(problems, [], 'no script error and no failed request on either host')
  t.ok(service.running(), 'the same process is still running')
})
