// A client as an SDK user writes it: types generated from the OpenAPI document (generated/roster.ts, made by
// test/http/openapi.test.ts), requests through openapi-fetch. Compiled strictly, so a wrong schema breaks the build.
import createClient from 'openapi-fetch'
import type { components, paths } from './generated/roster.js'

type User = components['schemas']['User']
type Problem = components['schemas']['Problem']
type ErrorCode = components['schemas']['ErrorCode']

export interface FlowResult {
  created: User
  me: User
  listed: components['schemas']['UserCollection']
  added: components['schemas']['Email']
  error: Problem
  errorStatus: number
  errorCode: ErrorCode
}

export async function flow(baseUrl: string): Promise<FlowResult> {
  const anonymous = createClient<paths>({ baseUrl })
  const credentials = { email: 'sdk@example.com', password: 'sdk-password-1' }

  const signup = await anonymous.POST('/users', { body: { name: 'Sdk User', ...credentials } })
  if (!signup.data) throw new Error(`signup failed: ${signup.response.status}`)
  const created: User = signup.data

  const login = await anonymous.POST('/auth/tokens', { body: credentials })
  if (!login.data) throw new Error(`login failed: ${login.response.status}`)
  const token: string = login.data.token

  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } })
  const me = await client.GET('/users/{user_id}', { params: { path: { user_id: created.id } } })
  if (!me.data) throw new Error('read self failed')

  const listed = await client.GET('/users', { params: { query: { name: 'sdk*' } } })
  if (!listed.data) throw new Error('list failed')

  const added = await client.POST('/users/{user_id}/emails', {
    params: { path: { user_id: created.id } },
    body: { address: 'sdk.second@example.com' }
  })
  if (!added.data) throw new Error('add address failed')

  const forbidden = await client.GET('/users/{user_id}', { params: { path: { user_id: created.id + 1000 } } })
  if (!forbidden.error) throw new Error('expected an error')
  const error: Problem = forbidden.error
  const errorCode: ErrorCode = error.code

  return { created, me: me.data, listed: listed.data, added: added.data, error, errorStatus: forbidden.response.status, errorCode }
}
