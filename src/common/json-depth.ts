/** How deep a JSON value nests (a scalar is 0, `{}` is 1), counted without recursion: a value may nest past any stack. */
export function jsonDepth(value: unknown): number {
  let deepest = 0
  const stack: Array<[unknown, number]> = [[value, 0]]
  while (stack.length) {
    const [item, depth] = stack.pop()!
    if (typeof item !== 'object' || item === null) continue
    deepest = Math.max(deepest, depth + 1)
    for (const child of Object.values(item)) stack.push([child, depth + 1])
  }
  return deepest
}

/** Whether a parsed JSON value holds a number past what a double holds: `1e400` parses as Infinity, written as null. */
export function holdsNonFinite(value: unknown): boolean {
  const stack: unknown[] = [value]
  while (stack.length) {
    const item = stack.pop()
    if (typeof item === 'number' && !Number.isFinite(item)) return true
    if (typeof item === 'object' && item !== null) for (const child of Object.values(item)) stack.push(child)
  }
  return false
}
