import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// A webhook's signing secrets get a table of their own, one row per secret: the webhook row held only the current
// secret and one former one, so parallel or quick rotations dropped secrets they had just answered. A secret signs
// until `expires_at`, null while it is current; a rotation gives every current secret the overlap and adds a new one.
// The secrets the webhook rows hold move here (the former one only while its overlap lasts), and their columns go.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const ref = mysql ? sql`bigint unsigned` : sql`integer`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``
  await sql`create table webhook_secrets (
    id ${id},
    webhook_id ${ref} not null references webhooks (id) on delete cascade,
    secret varchar(100) not null,
    created_at bigint not null,
    expires_at bigint null
  ) ${options}`.execute(db)
  await db.schema.createIndex('webhook_secrets_webhook_idx').on('webhook_secrets').columns(['webhook_id', 'expires_at']).execute()
  await db.schema.createIndex('webhook_secrets_expires_idx').on('webhook_secrets').column('expires_at').execute()

  // When a secret was made was not kept: the former one's webhook's creation, the current one's last change stand in.
  await sql`insert into webhook_secrets (webhook_id, secret, created_at, expires_at)
    select id, previous_secret, created_at, previous_secret_until from webhooks
    where previous_secret is not null and previous_secret_until > ${Date.now()}`.execute(db)
  await sql`insert into webhook_secrets (webhook_id, secret, created_at, expires_at)
    select id, secret, updated_at, null from webhooks`.execute(db)
  for (const column of ['secret', 'previous_secret', 'previous_secret_until']) {
    await sql`alter table webhooks drop column ${sql.ref(column)}`.execute(db)
  }
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table webhooks add column secret varchar(100) not null default ''`.execute(db)
  await sql`alter table webhooks add column previous_secret varchar(100) null`.execute(db)
  await sql`alter table webhooks add column previous_secret_until bigint null`.execute(db)
  // The newest current secret signs; of the others still live, the one that signs longest is kept as the former.
  await sql`update webhooks set secret = coalesce((select s.secret from webhook_secrets s
    where s.webhook_id = webhooks.id and s.expires_at is null order by s.id desc limit 1), '')`.execute(db)
  const former = (column: string) => sql`(select ${sql.ref(`s.${column}`)} from webhook_secrets s
    where s.webhook_id = webhooks.id and s.expires_at > ${Date.now()} order by s.expires_at desc limit 1)`
  await sql`update webhooks set previous_secret = ${former('secret')}, previous_secret_until = ${former('expires_at')}`.execute(db)
  await db.schema.dropTable('webhook_secrets').execute()
}
