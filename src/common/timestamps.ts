/** The contract's form of a millisecond timestamp: ISO 8601 in UTC, with milliseconds. */
export const isoTimestamp = (ms: number): string => new Date(ms).toISOString()
