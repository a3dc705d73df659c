import { EVENT_TYPES, type EventType } from '../../schemas/event.js'
import { InvalidInput } from '../common/errors.js'

/** Whether a type pattern (`user.created`, or a family `user.*`) covers a type. */
export function covers(pattern: string, type: EventType): boolean {
  return pattern.endsWith('.*') ? type.startsWith(pattern.slice(0, -1)) : pattern === type
}

/**
 * The types a list of patterns names, families spelt out. A pattern naming no type (`user.renamed`, `billing.*`)
 * is refused with `code` (INVALID_FILTER in a query, VALIDATION_FAILED in a body), pointing at it.
 */
export function typesOf(patterns: readonly string[], where: { in: 'query' | 'body'; path: string; code: 'INVALID_FILTER' | 'VALIDATION_FAILED' }): EventType[] {
  const named = new Set<EventType>()
  for (const [i, pattern] of patterns.entries()) {
    const types = EVENT_TYPES.filter((t) => covers(pattern, t))
    if (types.length === 0) {
      throw new InvalidInput(`${pattern} is not an event type nor a family of them (user.*, email.*, password.*, session.*, login.*)`,
        [{ path: `${where.path}/${i}`, in: where.in, message: 'names no event type' }], where.code)
    }
    for (const t of types) named.add(t)
  }
  return [...named]
}
