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
