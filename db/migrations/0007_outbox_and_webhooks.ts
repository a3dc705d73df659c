import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// One outbox for every kind of message: the mail outbox becomes `outbox`, its rows of kind `mail` (the template
// they render is `template`, formerly `kind`), beside webhook deliveries (kind `webhook`: the event to POST, to
// which webhook, and the last answer's status). Pending mail is kept as it is. Webhooks: the endpoints events are
// pushed to, with their signing secrets (the former one kept for the overlap after a rotation), the lease that lets
// one instance at a time send to each, and since when all of its deliveries have failed.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``

  await sql`alter table mail_outbox rename to outbox`.execute(db)
  await sql`alter table outbox rename column kind to template`.execute(db)
  await sql`alter table outbox add column kind varchar(16) not null default 'mail'`.execute(db)
  await sql`alter table outbox add column webhook_id bigint null`.execute(db)
  await sql`alter table outbox add column event_id varchar(40) null`.execute(db)
  await sql`alter table outbox add column last_attempt_at bigint null`.execute(db)
  await sql`alter table outbox add column last_status_code integer null`.execute(db)
  await sql.raw(mysql ? 'drop index mail_outbox_due_idx on outbox' : 'drop index mail_outbox_due_idx').execute(db)
  await db.schema.createIndex('outbox_due_idx').on('outbox').columns(['kind', 'state', 'next_attempt_at']).execute()
  await db.schema.createIndex('outbox_webhook_idx').on('outbox').columns(['webhook_id', 'state', 'next_attempt_at']).execute()
  await db.schema.createIndex('outbox_created_idx').on('outbox').column('created_at').execute()

  await sql`create table webhooks (
    id ${id},
    url varchar(2048) not null,
    events varchar(2000) not null,
    enabled integer not null,
    description varchar(500) not null,
    secret varchar(100) not null,
    previous_secret varchar(100) null,
    previous_secret_until bigint null,
    disabled_reason varchar(200) null,
    failing_since bigint null,
    lease varchar(32) null,
    lease_until bigint null,
    created_at bigint not null,
    updated_at bigint not null
  ) ${options}`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  await db.schema.dropTable('webhooks').execute()
  await sql`delete from outbox where kind <> 'mail'`.execute(db)
  await sql.raw(mysql ? 'drop index outbox_due_idx on outbox' : 'drop index outbox_due_idx').execute(db)
  await sql.raw(mysql ? 'drop index outbox_webhook_idx on outbox' : 'drop index outbox_webhook_idx').execute(db)
  await sql.raw(mysql ? 'drop index outbox_created_idx on outbox' : 'drop index outbox_created_idx').execute(db)
  for (const column of ['kind', 'webhook_id', 'event_id', 'last_attempt_at', 'last_status_code']) {
    await sql`alter table outbox drop column ${sql.ref(column)}`.execute(db)
  }
  await sql`alter table outbox rename column template to kind`.execute(db)
  await sql`alter table outbox rename to mail_outbox`.execute(db)
  await db.schema.createIndex('mail_outbox_due_idx').on('mail_outbox').columns(['state', 'next_attempt_at']).execute()
}
