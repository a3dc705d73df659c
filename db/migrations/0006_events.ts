import { MysqlAdapter, sql, type Kysely } from 'kysely'

// Frozen once landed: later changes go into new migrations.
//
// Events: one row per change to a user, an address, a session or a credential, written in the change's own
// transaction. `position` is given after commit by the sequencer (src/events/sequencer.ts), one instance at a time
// under the lock of `event_sequence`'s row, so the feed's order is the order events became visible, not the order
// their transactions began: a reader that follows the feed never misses one that committed late.

export async function up(db: Kysely<unknown>): Promise<void> {
  const mysql = db.getExecutor().adapter instanceof MysqlAdapter
  const id = mysql ? sql`bigint unsigned not null auto_increment primary key` : sql`integer primary key autoincrement not null`
  const options = mysql ? sql`engine=InnoDB default charset=utf8mb4 collate=utf8mb4_bin` : sql``
  const json = mysql ? sql`mediumtext` : sql`text`

  await sql`create table events (
    id ${id},
    public_id varchar(40) not null,
    type varchar(40) not null,
    user_id bigint null,
    actor_type varchar(16) not null,
    actor_id bigint null,
    request_id varchar(128) null,
    data ${json} not null,
    previous ${json} null,
    occurred_at bigint not null,
    position bigint null
  ) ${options}`.execute(db)
  await db.schema.createIndex('events_public_id_uq').on('events').column('public_id').unique().execute()
  await db.schema.createIndex('events_position_uq').on('events').column('position').unique().execute()
  await db.schema.createIndex('events_user_idx').on('events').columns(['user_id', 'id']).execute()
  await db.schema.createIndex('events_occurred_idx').on('events').column('occurred_at').execute()

  await sql`create table event_sequence (
    name varchar(32) not null primary key,
    value bigint not null
  ) ${options}`.execute(db)
  await sql`insert into event_sequence (name, value) values ('events', 0)`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('event_sequence').execute()
  await db.schema.dropTable('events').execute()
}
