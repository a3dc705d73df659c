import { Type, type Static } from '@sinclair/typebox'
import { Address, Href, Id, Timestamp } from './common.js'
import { ref } from './ref.js'

export const Email = Type.Object(
  {
    id: Id,
    href: Href,
    address: Type.String(),
    primary: Type.Boolean(),
    verified: Type.Boolean({ description: 'The owner showed they read mail sent to this address' }),
    verified_at: Type.Union([Timestamp, Type.Null()], { description: 'When it was verified; null while unverified' }),
    created_at: Timestamp
  },
  { $id: 'Email', description: 'An e-mail address of a user; responses may gain fields: clients must ignore the ones they do not know', examples: [{'id': 7, 'href': '/users/42/emails/7', 'address': 'ada@example.com', 'primary': true, 'verified': true, 'verified_at': '2026-11-21T10:00:00.000Z', 'created_at': '2026-11-21T10:00:00.000Z'}] }
)
export type Email = Static<typeof Email>

export const EmailCollection = Type.Object(
  {
    href: Href,
    items: Type.Array(ref(Email)),
    next: Type.Union([Type.String(), Type.Null()])
  },
  { $id: 'EmailCollection', description: 'A page of addresses', examples: [{'href': '/users/42/emails?limit=50', 'items': [{'id': 7, 'href': '/users/42/emails/7', 'address': 'ada@example.com', 'primary': true, 'verified': true, 'verified_at': '2026-11-21T10:00:00.000Z', 'created_at': '2026-11-21T10:00:00.000Z'}], 'next': null}] }
)
export type EmailCollection = Static<typeof EmailCollection>

/** The body of the primary address's key path (`/users/{user_id}/email`). */
export const PrimaryEmailValue = Type.Object({ email: Address }, { $id: 'PrimaryEmailValue', additionalProperties: false, description: 'The new primary address', examples: [{ email: 'ada@example.org' }] })
export type PrimaryEmailValue = Static<typeof PrimaryEmailValue>

export const NewEmail = Type.Object({ address: Address }, { $id: 'NewEmail', additionalProperties: false, description: 'An address to add', examples: [{ address: 'ada@example.org' }] })
export type NewEmail = Static<typeof NewEmail>

/** A change to one address: its text, whether it is the primary (only a verified address may become it), or both. */
export const EmailChange = Type.Object(
  {
    address: Type.Optional(Address),
    primary: Type.Optional(Type.Boolean({ description: '`true` makes this address primary (it must be verified); the former primary stays as a secondary address' }))
  },
  { $id: 'EmailChange', additionalProperties: false, description: 'A new text for the address, `primary: true`, or both', minProperties: 1, examples: [{ primary: true }, { address: 'ada@example.org' }] }
)
export type EmailChange = Static<typeof EmailChange>

/** The answer to a resend: where the verification mail went and when its token expires. */
export const VerificationSent = Type.Object(
  {
    sent_to: Type.String({ description: 'The address the mail was written to' }),
    expires_at: Timestamp
  },
  { $id: 'VerificationSent', description: 'Where the verification mail went, and when its token expires', examples: [{'sent_to': 'ada@example.com', 'expires_at': '2026-11-22T10:00:00.000Z'}] }
)
export type VerificationSent = Static<typeof VerificationSent>
