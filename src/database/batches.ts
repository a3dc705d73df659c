/** Rows one purge deletes at a time: short statements, short locks. */
export const PURGE_BATCH = 500

/**
 * Deletes in rounds of at most `batch` rows, each round its own short statement or transaction, so that a purge of
 * many rows never holds their locks at once: `pick` reads the ids of the next round (at most `limit`), `remove`
 * deletes them and tells how many went. Ends with a round that comes back short, or when `stop()` says so; how many
 * went in all.
 */
export async function deleteInBatches(
  batch: number, pick: (limit: number) => Promise<number[]>, remove: (ids: number[]) => Promise<number>, stop: () => boolean = () => false
): Promise<number> {
  let removed = 0
  while (!stop()) {
    const ids = await pick(batch)
    if (ids.length > 0) removed += await remove(ids)
    if (ids.length < batch) break
  }
  return removed
}
