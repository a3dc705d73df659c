const pad2 = (n: number) => (n < 10 ? '0' : '') + n
const pad3 = (n: number) => (n < 10 ? '00' : n < 100 ? '0' : '') + n

/** 0000-01-01T00:00:00.000Z and 10000-01-01T00:00:00.000Z: the range written with a four-digit year. */
const FIRST_MS = -62167219200000
const END_MS = 253402300800000

/**
 * The ISO 8601 form of a millisecond timestamp, exactly as `new Date(ms).toISOString()` writes it, for less (every
 * user in every answer carries two timestamps; `npm run bench:profile` weighs it). Days to a civil date by H. Hinnant's algorithm;
 * outside years 0–9999 (never stored) it defers to Date.
 */
export function isoTimestamp(ms: number): string {
  if (!Number.isInteger(ms) || ms < FIRST_MS || ms >= END_MS) return new Date(ms).toISOString()
  const days = Math.floor(ms / 86_400_000)
  let rest = ms - days * 86_400_000
  const z = days + 719_468
  const era = Math.floor(z / 146_097)
  const dayOfEra = z - era * 146_097
  const yearOfEra = Math.floor((dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365)
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100))
  const mp = Math.floor((5 * dayOfYear + 2) / 153)
  const day = dayOfYear - Math.floor((153 * mp + 2) / 5) + 1
  const month = mp < 10 ? mp + 3 : mp - 9
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
  const hours = Math.floor(rest / 3_600_000)
  rest -= hours * 3_600_000
  const minutes = Math.floor(rest / 60_000)
  rest -= minutes * 60_000
  const seconds = Math.floor(rest / 1000)
  return (year < 1000 ? String(year).padStart(4, '0') : String(year)) + '-' + pad2(month) + '-' + pad2(day) +
    'T' + pad2(hours) + ':' + pad2(minutes) + ':' + pad2(seconds) + '.' + pad3(rest - seconds * 1000) + 'Z'
}
