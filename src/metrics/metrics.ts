import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { LOGIN_RESULTS, type DeliveryResult, type LoginResult, type OutboxBacklog, type OutboxKind, type PoolUse } from './kinds.js'

/** OpenTelemetry's recommended boundaries for HTTP server durations, in seconds. */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]

/**
 * The service's Prometheus metrics, one registry per app (so that two apps in one process count apart). Request
 * durations and rate-limit refusals are counted from each answer; features report logins and deliveries through
 * the methods below; the outbox and the pool are read only when scraped. Process metrics (memory, CPU, event-loop
 * lag) are prom-client's own.
 */
export class Metrics {
  readonly registry = new Registry()
  private readonly durations = new Histogram({
    name: 'http_server_request_duration_seconds', help: 'Duration of HTTP requests, by method, route template and status',
    labelNames: ['method', 'route', 'status_code'] as const, buckets: DURATION_BUCKETS, registers: [this.registry]
  })
  private readonly refusals = new Counter({
    name: 'roster_rate_limit_refusals_total', help: 'Requests refused with 429 by a rate or failure limit, by route template',
    labelNames: ['route'] as const, registers: [this.registry]
  })
  private readonly logins = new Counter({
    name: 'roster_logins_total', help: 'Password logins, by result', labelNames: ['result'] as const, registers: [this.registry]
  })
  private readonly deliveries = new Counter({
    name: 'roster_outbox_deliveries_total', help: 'Delivery attempts of the outbox, by kind and result',
    labelNames: ['kind', 'result'] as const, registers: [this.registry]
  })
  private readonly importLines = new Counter({
    name: 'roster_import_lines_total', help: 'Lines of imports applied, by result', labelNames: ['result'] as const, registers: [this.registry]
  })
  private readonly exportedUsers = new Counter({
    name: 'roster_exported_users_total', help: 'Users written by exports', registers: [this.registry]
  })
  private readonly backlogs = new Map<OutboxKind, () => Promise<OutboxBacklog>>()
  private pool: (() => PoolUse) | undefined

  constructor() {
    collectDefaultMetrics({ register: this.registry })
    // Zero from the start, so that a rate() over a fresh process has a series to work on.
    for (const result of LOGIN_RESULTS) this.logins.inc({ result }, 0)
    for (const result of ['created', 'updated', 'skipped', 'failed'] as const) this.importLines.inc({ result }, 0)
    for (const kind of ['mail', 'webhook'] as const) {
      for (const result of ['delivered', 'retried', 'failed'] as const) this.deliveries.inc({ kind, result }, 0)
    }
    const backlogs = this.backlogs
    // A backlog that cannot be read (the database is down) is left out of the scrape: no figure rather than a stale one.
    const readAll = async () => (await Promise.all([...backlogs].map(async ([kind, backlog]) => {
      try {
        return [[kind, await backlog()] as const]
      } catch {
        return []
      }
    }))).flat()
    // The two outbox gauges are collected side by side in one scrape: they share one read (one query per kind).
    let reading: ReturnType<typeof readAll> | undefined
    const read = () => (reading ??= readAll().finally(() => { reading = undefined }))
    new Gauge({
      name: 'roster_outbox_pending', help: 'Messages waiting in the outbox, by kind', labelNames: ['kind'] as const, registers: [this.registry],
      async collect() {
        this.reset()
        for (const [kind, backlog] of await read()) this.set({ kind }, backlog.pending)
      }
    })
    new Gauge({
      name: 'roster_outbox_oldest_age_seconds', help: 'Age of the oldest message waiting in the outbox, by kind', labelNames: ['kind'] as const,
      registers: [this.registry],
      async collect() {
        this.reset()
        for (const [kind, backlog] of await read()) this.set({ kind }, backlog.oldestAgeSeconds)
      }
    })
    const pool = () => this.pool?.()
    new Gauge({
      name: 'roster_db_pool_connections', help: 'Database pool connections: its size and those in use', labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const use = pool()
        if (!use) return
        this.set({ state: 'max' }, use.size)
        this.set({ state: 'in_use' }, use.inUse)
      }
    })
    new Counter({
      name: 'roster_db_pool_waits_total', help: 'Requests that had to wait for a database connection', registers: [this.registry],
      collect() {
        const use = pool()
        if (!use) return
        this.reset()
        this.inc(use.waits)
      }
    })
  }

  /** An answered request: its duration, and a 429 as a refusal. `route` is the route template, or `unmatched`. */
  answered(method: string, route: string, status: number, seconds: number): void {
    this.durations.observe({ method, route, status_code: status }, seconds)
    if (status === 429) this.refusals.inc({ route })
  }

  login(result: LoginResult): void {
    this.logins.inc({ result })
  }

  delivered(kind: OutboxKind, result: DeliveryResult): void {
    this.deliveries.inc({ kind, result })
  }

  /** Lines of an import applied with one result. */
  imported(result: 'created' | 'updated' | 'skipped' | 'failed', lines: number): void {
    this.importLines.inc({ result }, lines)
  }

  exported(users: number): void {
    this.exportedUsers.inc(users)
  }

  /** How to read the outbox's backlog of a kind at scrape time. */
  watchOutbox(kind: OutboxKind, backlog: () => Promise<OutboxBacklog>): void {
    this.backlogs.set(kind, backlog)
  }

  /** How to read the database pool at scrape time. */
  watchPool(use: () => PoolUse): void {
    this.pool = use
  }
}
