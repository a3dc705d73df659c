import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Reverts: when a user's primary address changes, the former primary (if it was verified) is mailed a token and a
// 6-digit code that make it the primary again. Unlike email_tokens, a revert is bound to the address's text, not to
// its row: the change may have removed or rewritten the row, and the revert re-adds it. Both the token and the code
// are stored as hashes (the code keyed, as in 0008). They die with their user, and when one of the user's reverts is
// used.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const ref = mysql ? sql`bigint unsigned` : sql`integer`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``
  await sql`create table email_reverts (
    id ${id},
    user_id ${ref} not null references users (id) on delete cascade,
    address varchar(254) not null,
    address_norm varchar(254) not null,
    token_hash char(64) not null,
    code_hash char(64) not null,
    code_tries integer not null default 0,
    created_at bigint not null,
    expires_at bigint not null
  ) ${options}`.execute(db)
  await db.schema.createIndex('email_reverts_hash_uq').on('email_reverts').column('token_hash').unique().execute()
  await db.schema.createIndex('email_reverts_address_idx').on('email_reverts').columns(['address_norm', 'expires_at']).execute()
  await db.schema.createIndex('email_reverts_user_idx').on('email_reverts').column('user_id').execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('email_reverts').execute()
}
