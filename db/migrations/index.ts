import type { Migration, MigrationProvider } from 'kysely'
import * as m0001 from './0001_initial.js'
import * as m0002 from './0002_primary_user_fk.js'
import * as m0003 from './0003_sessions.js'
import * as m0004 from './0004_verified_addresses.js'
import * as m0005 from './0005_idempotency_keys.js'
import * as m0006 from './0006_events.js'
import * as m0007 from './0007_outbox_and_webhooks.js'
import * as m0008 from './0008_email_codes.js'
import * as m0009 from './0009_email_reverts.js'
import * as m0010 from './0010_expiry_indexes.js'
import * as m0011 from './0011_webhook_secrets.js'
import * as m0012 from './0012_password_set_at.js'
import * as m0013 from './0013_imports.js'
import * as m0014 from './0014_scim.js'
import * as m0015 from './0015_metadata.js'
import * as m0016 from './0016_privacy.js'
import * as m0017 from './0017_idempotency_user.js'
import * as m0018 from './0018_user_tally.js'
import * as m0019 from './0019_users_role_idx.js'

/** Every migration, in order. Listed statically so the same code runs from TypeScript sources and the build. */
export const migrations: Record<string, Migration> = {
  '0001_initial': m0001,
  '0002_primary_user_fk': m0002,
  '0003_sessions': m0003,
  '0004_verified_addresses': m0004,
  '0005_idempotency_keys': m0005,
  '0006_events': m0006,
  '0007_outbox_and_webhooks': m0007,
  '0008_email_codes': m0008,
  '0009_email_reverts': m0009,
  '0010_expiry_indexes': m0010,
  '0011_webhook_secrets': m0011,
  '0012_password_set_at': m0012,
  '0013_imports': m0013,
  '0014_scim': m0014,
  '0015_metadata': m0015,
  '0016_privacy': m0016,
  '0017_idempotency_user': m0017,
  '0018_user_tally': m0018,
  '0019_users_role_idx': m0019
}

export const migrationProvider: MigrationProvider = {
  getMigrations: async () => migrations
}
