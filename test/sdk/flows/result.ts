/** What every generator's flow reports, for the suite to compare with what the service stored. */
export interface FlowResult {
  userId: number
  name: string
  listedIds: number[]
  address: string
  primary: boolean
  forbiddenStatus: number
  forbiddenCode: string
}

/** The names and addresses a flow uses, distinct per generator. */
export const names = (tag: string) => ({
  name: `Sdk ${tag}`,
  email: `sdk.${tag}@example.com`,
  password: 'sdk-password-1',
  renamed: `Renamed ${tag}`,
  second: `second.${tag}@example.com`
})

/** A flow's result from the answers it got, whatever shape its generator gives them. */
export function report(
  me: { id: number }, renamed: { name: string }, listed: { items: Array<{ id: number }> }, added: { address: string; primary: boolean },
  forbidden: { status: number; code: string }
): FlowResult {
  return {
    userId: me.id, name: renamed.name, listedIds: listed.items.map((u) => u.id), address: added.address, primary: added.primary,
    forbiddenStatus: forbidden.status, forbiddenCode: forbidden.code
  }
}
