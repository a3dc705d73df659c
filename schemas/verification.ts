import { Type, type Static } from '@sinclair/typebox'
import { Address, Password } from './common.js'

/** A token mailed to an address, sent back to prove the mail was read. */
const MailedToken = Type.String({ minLength: 1, maxLength: 512, description: 'The token from the mail' })

export const EmailVerification = Type.Object({ token: MailedToken }, { $id: 'EmailVerification', additionalProperties: false, description: 'The token of a verification mail', examples: [{ token: 'hV3pQ9xR2mT7wK4nB8cD1fG6jL0sA5eY_uI-oZ2vX3w' }] })
export type EmailVerification = Static<typeof EmailVerification>

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
  { token: MailedToken, password: Password },
  { $id: 'PasswordResetConfirm', additionalProperties: false, description: 'A reset token and the new password', examples: [{ token: 'hV3pQ9xR2mT7wK4nB8cD1fG6jL0sA5eY_uI-oZ2vX3w', password: 'a-new-long-password' }] }
)
export type PasswordResetConfirm = Static<typeof PasswordResetConfirm>
