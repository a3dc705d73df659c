import { CompiledQuery, type Compilable, type InferResult, type QueryResult } from 'kysely'
import type { Db, DirectRead, Trx } from './index.js'

/**
 * A query built and compiled once, then run many times with new values through the database's direct read, for the
 * statement every authenticated request runs. It is built with one distinct marker per value; each marker must come
 * out as exactly one parameter, whose position then takes the value on every run. The rows are typed by the query.
 */
export function compiledOnce<A extends unknown[], Q extends Compilable<unknown>>(
  read: DirectRead, build: (...values: A) => Q, markers: A
): (...values: A) => Promise<InferResult<Q>> {
  const compiled = build(...markers).compile()
  const template = [...compiled.parameters]
  const positions = markers.map((marker) => {
    const at = template.indexOf(marker)
    if (at < 0 || template.indexOf(marker, at + 1) >= 0) throw new Error(`compiledOnce: marker ${String(marker)} must be one parameter of the query`)
    return at
  })
  return (...values) => {
    const parameters = template.slice()
    for (let i = 0; i < positions.length; i++) parameters[positions[i]!] = values[i]
    return read<InferResult<Q>>(compiled.sql, parameters)
  }
}

/** A statement compiled for one engine: its text, its parameters with the markers' places. */
interface Template { sql: string; parameters: unknown[]; positions: number[] }

/**
 * A statement of the hot path built and compiled once per engine, then run many times with new values on a handle
 * or a transaction (Kysely's builder and compiler cost tens of µs a statement; a write sends several). Built with
 * one distinct marker per value, as compiledOnce; the result is Kysely's, typed by the query.
 */
export function reusable<A extends unknown[], Q extends Compilable<unknown>>(
  build: (db: Db | Trx, ...values: A) => Q, markers: A
): (db: Db | Trx, ...values: A) => Promise<QueryResult<InferResult<Q>[number]>> {
  const templates = new Map<unknown, Template>()
  return (db, ...values) => {
    const engine = db.getExecutor().adapter.constructor
    let template = templates.get(engine)
    if (!template) {
      const compiled = build(db, ...markers).compile()
      const parameters = [...compiled.parameters]
      const positions = markers.map((marker) => {
        const at = parameters.indexOf(marker)
        if (at < 0 || parameters.indexOf(marker, at + 1) >= 0) throw new Error(`reusable: marker ${String(marker)} must be one parameter of the query`)
        return at
      })
      templates.set(engine, template = { sql: compiled.sql, parameters, positions })
    }
    const parameters = template.parameters.slice()
    for (let i = 0; i < template.positions.length; i++) parameters[template.positions[i]!] = values[i]
    return db.executeQuery<InferResult<Q>[number]>(CompiledQuery.raw(template.sql, parameters))
  }
}
