import { CompiledQuery, type Compilable, type InferResult, type QueryResult } from 'kysely'
import type { Db, DirectRead, Trx } from './index.js'

/**
 * A statement compiled once, with the places of its values: built with one distinct marker per value, each marker
 * must come out as exactly one parameter, whose position then takes the value on every run.
 */
class Template<A extends unknown[]> {
  readonly sql: string
  private readonly parameters: unknown[]
  private readonly positions: number[]

  constructor(query: Compilable<unknown>, markers: A) {
    const compiled = query.compile()
    this.sql = compiled.sql
    this.parameters = [...compiled.parameters]
    this.positions = markers.map((marker) => {
      const at = this.parameters.indexOf(marker)
      if (at < 0 || this.parameters.indexOf(marker, at + 1) >= 0) throw new Error(`compiled statement: marker ${String(marker)} must be one parameter of the query`)
      return at
    })
  }

  /** The parameters of one run, the values in the markers' places. */
  fill(values: A): unknown[] {
    const parameters = this.parameters.slice()
    for (let i = 0; i < this.positions.length; i++) parameters[this.positions[i]!] = values[i]
    return parameters
  }
}

/**
 * A query built and compiled once, then run many times with new values through the database's direct read, for the
 * statement every authenticated request runs. The rows are typed by the query; they come as the read gives them, at
 * once or with a promise.
 */
export function compiledOnce<A extends unknown[], Q extends Compilable<unknown>>(
  read: DirectRead, build: (...values: A) => Q, markers: A
): (...values: A) => InferResult<Q> | Promise<InferResult<Q>> {
  const template = new Template(build(...markers), markers)
  return (...values) => read<InferResult<Q>>(template.sql, template.fill(values))
}

/**
 * A statement of the hot path built and compiled once per engine, then run many times with new values on a handle
 * or a transaction (Kysely's builder and compiler cost tens of µs a statement; a write sends several). The result is
 * Kysely's, typed by the query.
 */
export function reusable<A extends unknown[], Q extends Compilable<unknown>>(
  build: (db: Db | Trx, ...values: A) => Q, markers: A
): (db: Db | Trx, ...values: A) => Promise<QueryResult<InferResult<Q>[number]>> {
  const templates = new Map<unknown, Template<A>>()
  return (db, ...values) => {
    const engine = db.getExecutor().adapter.constructor
    let template = templates.get(engine)
    if (!template) templates.set(engine, template = new Template(build(db, ...markers), markers))
    return db.executeQuery<InferResult<Q>[number]>(CompiledQuery.raw(template.sql, template.fill(values)))
  }
}
