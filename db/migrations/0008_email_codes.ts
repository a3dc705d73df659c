import { sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// E-mail codes: a mailed token may carry a 6-digit code beside it, stored only as a keyed hash (HMAC-SHA256 under
// a secret of the database's app_secrets, so that the table alone does not give a million candidates away), with
// its own expiry (never later than its token's) and the wrong tries it has taken (dead at 5).

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table email_tokens add column code_hash varchar(64) null`.execute(db)
  await sql`alter table email_tokens add column code_expires_at bigint null`.execute(db)
  await sql`alter table email_tokens add column code_tries integer not null default 0`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const column of ['code_hash', 'code_expires_at', 'code_tries']) await sql`alter table email_tokens drop column ${sql.ref(column)}`.execute(db)
}
