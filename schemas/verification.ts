import { Type, type Static } from '@sinclair/typebox'
import { Address, Password } from './common.js'

/** A token mailed to an address, sent back to prove the mail was read. */
const MailedToken = Type.String({ minLength: 1, maxLength: 512, description: 'The token from the mail' })

/** The 6-digit code of a mail, sent back with the address it was mailed to instead of the token. */
export const MailedCode = Type.String({ pattern: '^[0-9]{6}$', description: 'The 6-digit code from the mail (with `email`), instead of the token' })
const CodeAddress = Type.String({ minLength: 3, maxLength: 254, description: 'With `code`: the address the mail went to' })

export const EmailVerification = Type.Object(
  { token: Type.Optional(MailedToken), email: Type.Optional(CodeAddress), code: Type.Optional(MailedCode) },
  { $id: 'EmailVerification', additionalProperties: false, description: 'The token of a verification mail, or its address and code', examples: [{ token: 'hV3pQ9xR2mT7wK4nB8cD1fG6jL0sA5eY_uI-oZ2vX3w' }, { email: 'ada@example.com', code: '493017' }] }
)
export type EmailVerification = Static<typeof EmailVerification>

export const EmailRevert = Type.Object(
  { token: Type.Optional(MailedToken), email: Type.Optional(CodeAddress), code: Type.Optional(MailedCode) },
  { $id: 'EmailRevert', additionalProperties: false, description: 'The token of the mail a former primary address got when the primary changed, or that address and the mail\'s code', examples: [{ token: 'hV3pQ9xR2mT7wK4nB8cD1fG6jL0sA5eY_uI-oZ2vX3w' }, { email: 'ada@example.com', code: '493017' }] }
)
export type EmailRevert = Static<typeof EmailRevert>

export const PasswordResetRequest = Type.Object(
  { email: Address },
  { $id: 'PasswordResetRequest', additionalProperties: false, description: 'The address to mail a reset token to', examples: [{ email: 'ada@example.com' }] }
)
export type PasswordResetRequest = Static<typeof PasswordResetRequest>

/** The one answer to a reset request, whether or not the address exists. */
export const PasswordResetAccepted = Type.Object(
  {
    detail: Type.String(),
    expires_in: Type.Integer({ minimum: 1, description: 'Seconds a mailed reset token lives' })
  },
  { $id: 'PasswordResetAccepted', description: 'The same answer whether or not the address exists', examples: [{'detail': 'If this address may receive a password reset, a mail with a token is on its way.', 'expires_in': 3600}] }
)
export type PasswordResetAccepted = Static<typeof PasswordResetAccepted>

export const PasswordResetConfirm = Type.Object(
  { token: Type.Optional(MailedToken), email: Type.Optional(CodeAddress), code: Type.Optional(MailedCode), password: Password },
  { $id: 'PasswordResetConfirm', additionalProperties: false, description: 'A reset token (or its address and code) and the new password', examples: [{ token: 'hV3pQ9xR2mT7wK4nB8cD1fG6jL0sA5eY_uI-oZ2vX3w', password: 'a-new-long-password' }, { email: 'ada@example.com', code: '493017', password: 'a-new-long-password' }] }
)

export const EmailCodeRequest = Type.Object(
  { email: Address },
  { $id: 'EmailCodeRequest', additionalProperties: false, description: 'The address to mail a sign-in code to', examples: [{ email: 'ada@example.com' }] }
)

/** The one answer to a request for a sign-in code, whether or not the address exists. */
export const EmailCodeAccepted = Type.Object(
  {
    detail: Type.String(),
    expires_in: Type.Integer({ minimum: 1, description: 'Seconds a mailed code lives' })
  },
  { $id: 'EmailCodeAccepted', description: 'The same answer whether or not the address exists', examples: [{ detail: 'If this address may sign in, a mail with a code is on its way.', expires_in: 600 }] }
)
export type PasswordResetConfirm = Static<typeof PasswordResetConfirm>
