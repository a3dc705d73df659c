import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Idempotency keys: the first answer to a POST sent with an Idempotency-Key, kept 24 hours so that a retry with
// the same key gets it again instead of doing the work twice. In the database, so that it holds across instances.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``
  const body = mysql ? sql`mediumtext` : sql`text`

  await sql`create table idempotency_keys (
    id ${id},
    key_hash char(64) not null,
    request_hash char(64) not null,
    state varchar(8) not null,
    status integer null,
    content_type varchar(100) null,
    location varchar(2048) null,
    etag varchar(100) null,
    body ${body} null,
    created_at bigint not null,
    expires_at bigint not null
  ) ${options}`.execute(db)
  await db.schema.createIndex('idempotency_keys_key_uq').on('idempotency_keys').column('key_hash').unique().execute()
  await db.schema.createIndex('idempotency_keys_expiry_idx').on('idempotency_keys').column('expires_at').execute()
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('idempotency_keys').execute()
}
