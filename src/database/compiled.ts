import type { Compilable, InferResult } from 'kysely'
import type { DirectRead } from './index.js'

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
