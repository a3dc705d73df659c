import { Actor, EndedSession, Event, EventCollection, EventType, ExportedUsers, FailedLogin, TypedEvents } from './event.js'
import { Import, ImportCollection, ImportErrorCollection, ImportFormat, ImportLine, ImportLineError, ImportStatus } from './import.js'
import { Metadata, MetadataPatch, MetadataReplacement } from './metadata.js'
import { Session, SessionCollection } from './session.js'
import {
  Delivery, DeliveryCollection, DeliveryStatus, NewWebhook, Webhook, WebhookCollection, WebhookReplacement, WebhookSecret, WebhookWithSecret
} from './webhook.js'
import { scimSchemas } from './scim.js'
import { UserData } from './privacy.js'
import { Token, TokenRequest } from './token.js'
import { Email, EmailChange, EmailCollection, NewEmail, PrimaryEmailValue, VerificationSent } from './email.js'
import { EmailCodeAccepted, EmailCodeRequest, EmailRevert, EmailVerification, PasswordResetAccepted, PasswordResetConfirm, PasswordResetRequest } from './verification.js'
import { ErrorCode, FieldError, FieldLocation, Problem } from './problem.js'
import { Ban, NameValue, NewUser, PasswordChange, RoleValue, StatusValue, User, UserCollection, UserRole, UserStatus } from './user.js'

/** Every shared schema, registered once with `app.addSchema` and named by its `$id` in the OpenAPI components. */
export const sharedSchemas = [
  ErrorCode, FieldLocation, FieldError, Problem,
  UserStatus, UserRole, Ban, User, UserCollection, NewUser, NameValue, StatusValue, RoleValue, PasswordChange,
  Email, EmailCollection, NewEmail, EmailChange, PrimaryEmailValue, VerificationSent,
  EmailVerification, EmailRevert, PasswordResetRequest, PasswordResetAccepted, PasswordResetConfirm, EmailCodeRequest, EmailCodeAccepted,
  Session, SessionCollection, TokenRequest, Token,
  EventType, Actor, Event, EventCollection, EndedSession, FailedLogin, ExportedUsers, ...TypedEvents,
  Metadata, MetadataPatch, MetadataReplacement, UserData,
  ImportFormat, ImportStatus, Import, ImportCollection, ImportLineError, ImportErrorCollection, ImportLine,
  Webhook, WebhookWithSecret, NewWebhook, WebhookReplacement, WebhookSecret, WebhookCollection, DeliveryStatus, Delivery, DeliveryCollection,
  ...scimSchemas
]
