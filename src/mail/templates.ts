import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { isoTimestamp } from '../common/timestamps.js'

/** The product's name, as every mail signs it. */
export const PRODUCT = 'Roster'

const TokenData = Type.Object({
  address: Type.String(), token: Type.String(), link: Type.Union([Type.String(), Type.Null()]), expires_at: Type.Number(),
  // Mails written before codes existed have none.
  code: Type.Optional(Type.String()), code_expires_at: Type.Optional(Type.Number())
})
const CodeData = Type.Object({ address: Type.String(), code: Type.String(), expires_at: Type.Number() })
const RevertData = Type.Object({ token: Type.String(), link: Type.Union([Type.String(), Type.Null()]), code: Type.String(), expires_at: Type.Number() })

/**
 * Every mail Roster sends, by kind, with the values its template needs. Stored in the outbox as JSON and rendered
 * when it is delivered, so the templates below are the one place a mail's words live.
 * - verify-address: a new or replaced address, or a resend: prove you read mail sent here;
 * - password-reset: a password reset asked for this address;
 * - primary-changed: sent to a verified former primary address when another address of the user became primary or
 *   the primary was replaced, with a revert (token and code); without one in mails written before reverts existed;
 * - signin-code: a code that signs in, asked for this address.
 */
const MailSchema = Type.Union([
  Type.Object({ kind: Type.Literal('verify-address'), to: Type.String(), data: TokenData }),
  Type.Object({ kind: Type.Literal('password-reset'), to: Type.String(), data: TokenData }),
  Type.Object({
    kind: Type.Literal('primary-changed'), to: Type.String(),
    // Mailed with a revert; mails written before reverts existed have none.
    data: Type.Object({ address: Type.String(), primary: Type.String(), revert: Type.Optional(RevertData) })
  }),
  Type.Object({ kind: Type.Literal('signin-code'), to: Type.String(), data: CodeData })
])

/** A mail as the outbox holds it before delivery. */
export type Mail = Static<typeof MailSchema>

/** A mail read back from the outbox, checked against what it must hold; undefined when it does not. */
export function mailOf(kind: string, to: string, data: string): Mail | undefined {
  let parsed: unknown
  try {
    parsed = JSON.parse(data)
  } catch {
    return undefined
  }
  const mail: unknown = { kind, to, data: parsed }
  return Value.Check(MailSchema, mail) ? mail : undefined
}

export interface Rendered {
  subject: string
  text: string
  html: string
}

const escape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')

/** "in 24 hours", "in 15 minutes": how long from `now` until `at`, rounded to a unit a reader takes in at once. */
export function timeLeft(at: number, now: number): string {
  const seconds = Math.max(0, Math.round((at - now) / 1000))
  const [n, unit] = seconds >= 172_800 ? [Math.round(seconds / 86_400), 'day']
    : seconds >= 7200 ? [Math.round(seconds / 3600), 'hour']
      : seconds >= 120 ? [Math.round(seconds / 60), 'minute']
        : [seconds, 'second']
  return `in ${n} ${unit}${n === 1 ? '' : 's'}`
}

/**
 * A paragraph list as plain text and as HTML, with the code on a line of its own (where iOS and Android find it to
 * offer filling it in), then the token and the link, when there are.
 */
function layout(subject: string, paragraphs: string[], secret?: { code?: string | undefined; token?: string; link?: string | null }): Rendered {
  const text = [...paragraphs]
  const html = paragraphs.map((p) => `<p>${escape(p)}</p>`)
  if (secret) {
    const lines: Array<[string, string]> = []
    if (secret.code) lines.push(['Your code:', `<p>Your code:</p><p style="font-size:24px;letter-spacing:4px"><strong>${escape(secret.code)}</strong></p>`])
    if (secret.code) lines.push([secret.code, ''])
    if (secret.token) lines.push([`Your token: ${secret.token}`, `<p>Your token: <code>${escape(secret.token)}</code></p>`])
    if (secret.link) lines.push([`Or open: ${secret.link}`, `<p><a href="${escape(secret.link)}">${escape(secret.link)}</a></p>`])
    text.splice(1, 0, ...lines.map(([t]) => t))
    html.splice(1, 0, ...lines.map(([, h]) => h).filter(Boolean))
  }
  text.push(`-- ${PRODUCT}`)
  html.push(`<p>&mdash; ${PRODUCT}</p>`)
  return {
    subject,
    text: text.join('\n\n') + '\n',
    html: `<!doctype html><html><head><meta charset="utf-8"><title>${escape(subject)}</title></head><body>${html.join('')}</body></html>`
  }
}

/** The subject and the plain-text and HTML bodies of a mail. */
export function render(mail: Mail, now = Date.now()): Rendered {
  switch (mail.kind) {
    case 'verify-address': {
      const d = mail.data
      return layout(d.code ? `${d.code} is your ${PRODUCT} code: confirm your address ${d.address}` : `${PRODUCT}: confirm your address ${d.address}`, [
        `Someone, we hope you, added ${d.address} to an account on ${PRODUCT}. To confirm that this address is yours, ${d.code ? 'type the code below in the app, or ' : ''}send the token below to ${PRODUCT} (your app does this when you open the link).`,
        `${d.code && d.code_expires_at ? `The code works once and expires ${timeLeft(d.code_expires_at, now)}. ` : ''}The token can be used once and expires at ${isoTimestamp(d.expires_at)} (${timeLeft(d.expires_at, now)}).`,
        'If this was not you, ignore this mail: the address stays unconfirmed.'
      ], d)
    }
    case 'password-reset': {
      const d = mail.data
      return layout(d.code ? `${d.code} is your ${PRODUCT} code: reset your password` : `${PRODUCT}: reset your password`, [
        `A new password was asked for the ${PRODUCT} account of ${d.address}. To choose one, ${d.code ? 'type the code below in the app, or ' : ''}send the token below with your new password (your app does this when you open the link). Every session of the account ends when you do.`,
        `${d.code && d.code_expires_at ? `The code works once and expires ${timeLeft(d.code_expires_at, now)}. ` : ''}The token can be used once and expires at ${isoTimestamp(d.expires_at)} (${timeLeft(d.expires_at, now)}).`,
        'If this was not you, ignore this mail: your password stays as it is.'
      ], d)
    }
    case 'signin-code': {
      const d = mail.data
      return layout(`${d.code} is your ${PRODUCT} sign-in code`, [
        `A sign-in code was asked for the ${PRODUCT} account of ${d.address}. Type it in the app to sign in.`,
        `It works once and expires ${timeLeft(d.expires_at, now)}, at ${isoTimestamp(d.expires_at)}.`,
        'If this was not you, ignore this mail: nobody can sign in without the code.'
      ], { code: d.code })
    }
    case 'primary-changed': {
      const d = mail.data
      if (!d.revert) {
        return layout(`${PRODUCT}: your primary address changed`, [
          `The primary address of your ${PRODUCT} account is now ${d.primary}, no longer ${d.address}.`,
          'If this was not you, log in and change your password at once.'
        ])
      }
      const r = d.revert
      return layout(`${r.code} is your ${PRODUCT} code: undo the change of your primary address`, [
        `The primary address of your ${PRODUCT} account is now ${d.primary}, no longer ${d.address}. If this was not you, type the code below in the app, or send the token below to ${PRODUCT} (your app does this when you open the link): ${d.address} becomes your primary address again and every session of the account ends.`,
        `The code and the token work once and expire at ${isoTimestamp(r.expires_at)} (${timeLeft(r.expires_at, now)}).`,
        'Then choose a new password, and remove any address you do not know. If the change was yours, ignore this mail.'
      ], r)
    }
  }
}

/** A link to a mailed token: APP_LINK_TEMPLATE with `{token}` (and `{purpose}`: verify, reset or revert) filled in. */
export function tokenLink(template: string | undefined, token: string, purpose: 'verify' | 'reset' | 'revert'): string | null {
  if (!template) return null
  return template.replaceAll('{token}', encodeURIComponent(token)).replaceAll('{purpose}', purpose)
}
