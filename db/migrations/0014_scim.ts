import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// SCIM 2.0: the tokens an identity provider presents on /scim/v2 (only their SHA-256 kept), and the ban's reason,
// end, time and author on the user row, so that a directory's deactivation (`deprovisioned`) can be told from an
// admin's ban and lifted by the directory alone.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``

  await sql`create table scim_tokens (
    id ${id},
    token_hash char(64) not null,
    description varchar(200) not null,
    created_by bigint null,
    created_at bigint not null,
    last_used_at bigint null
  ) ${options}`.execute(db)
  await db.schema.createIndex('scim_tokens_hash_uq').on('scim_tokens').column('token_hash').unique().execute()

  await sql`alter table users add column ban_reason varchar(500) null`.execute(db)
  await sql`alter table users add column banned_until bigint null`.execute(db)
  await sql`alter table users add column banned_at bigint null`.execute(db)
  await sql`alter table users add column banned_by_type varchar(16) null`.execute(db)
  await sql`alter table users add column banned_by_id bigint null`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const column of ['banned_by_id', 'banned_by_type', 'banned_at', 'banned_until', 'ban_reason']) {
    await sql`alter table users drop column ${sql.ref(column)}`.execute(db)
  }
  await db.schema.dropTable('scim_tokens').execute()
}
