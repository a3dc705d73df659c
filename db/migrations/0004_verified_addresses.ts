import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Verified addresses and mail:
// - emails.verified_at: when the address was shown to be read by its owner (null: not yet).
// - emails.claimed_at: when the address was last set (added or replaced). Null for addresses that existed before
//   verification did: those are never given up by the unverified-claim rule, only verified or removed.
// - email_tokens: single-use tokens mailed to an address (verification, password reset), stored as hashes. They die
//   with their address (cascade) and are deleted when the address changes.
// - mail_outbox: mail written in the same transaction as the change that causes it, delivered in the background.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const ref = mysql ? sql`bigint unsigned` : sql`integer`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``

  await sql`alter table emails add column verified_at bigint null`.execute(db)
  await sql`alter table emails add column claimed_at bigint null`.execute(db)

  await sql`create table email_tokens (
    id ${id},
    token_hash char(64) not null,
    purpose varchar(16) not null,
    email_id ${ref} not null references emails (id) on delete cascade,
    user_id ${ref} not null references users (id) on delete cascade,
    created_at bigint not null,
    expires_at bigint not null
  ) ${options}`.execute(db)
  await db.schema.createIndex('email_tokens_hash_uq').on('email_tokens').column('token_hash').unique().execute()
  await db.schema.createIndex('email_tokens_email_idx').on('email_tokens').columns(['email_id', 'purpose', 'created_at']).execute()
  await db.schema.createIndex('email_tokens_user_idx').on('email_tokens').columns(['user_id', 'purpose']).execute()

  await sql`create table mail_outbox (
    id ${id},
    kind varchar(32) not null,
    recipient varchar(320) not null,
    data text not null,
    state varchar(8) not null,
    attempts integer not null,
    created_at bigint not null,
    next_attempt_at bigint not null,
    claim varchar(32) null,
    sent_at bigint null,
    last_error varchar(500) null
  ) ${options}`.execute(db)
  await db.schema.createIndex('mail_outbox_due_idx').on('mail_outbox').columns(['state', 'next_attempt_at']).execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('mail_outbox').execute()
  await db.schema.dropTable('email_tokens').execute()
  await sql`alter table emails drop column claimed_at`.execute(db)
  await sql`alter table emails drop column verified_at`.execute(db)
}
