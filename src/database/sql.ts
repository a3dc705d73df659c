/** Escapes LIKE's wildcards (and the escape character itself) with `!`; pair with `escape '!'`. */
export function likeEscape(text: string): string {
  return text.replace(/[!%_]/g, (c) => '!' + c)
}

/** Upper bound for a prefix range over a binary-collated column: every string starting with the prefix sorts below it. */
export function prefixUpperBound(prefix: string): string {
  return prefix + '\u{10FFFF}'
}
