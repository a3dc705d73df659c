import { sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// When a user's password was last set (a change, an admin's reset, a reset by mail): a revert of a primary change
// voids a password set after that change, since whoever made the change may have set it. Null for a password set
// at sign-up or before this column existed. A user with no password holds the empty string as its hash.

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table users add column password_set_at bigint null`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table users drop column password_set_at`.execute(db)
}
