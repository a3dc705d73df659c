// The flow an SDK user writes with openapi-typescript's types and openapi-fetch.
import createClient from 'openapi-fetch'
import type { paths } from '../out/openapi-typescript/roster.js'
import { names, report, type FlowResult } from './result.js'

export async function flow(baseUrl: string, tag: string): Promise<FlowResult> {
  const n = names(tag)
  const anonymous = createClient<paths>({ baseUrl })
  const created = await anonymous.POST('/users', { body: { name: n.name, email: n.email, password: n.password } })
  if (!created.data) throw new Error('createUser failed')
  const login = await anonymous.POST('/auth/tokens', { body: { email: n.email, password: n.password } })
  if (!login.data) throw new Error('createToken failed')
  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${login.data.token}` } })
  const me = await client.GET('/users/{user_id}', { params: { path: { user_id: created.data.id } } })
  if (!me.data) throw new Error('getUser failed')
  const listed = await client.GET('/users', { params: { query: { name: `${n.name.toLowerCase()}*` } } })
  if (!listed.data) throw new Error('listUsers failed')
  const renamed = await client.PUT('/users/{user_id}/name', { params: { path: { user_id: me.data.id } }, body: { name: n.renamed } })
  if (!renamed.data) throw new Error('setUserName failed')
  const added = await client.POST('/users/{user_id}/emails', { params: { path: { user_id: me.data.id } }, body: { address: n.second } })
  if (!added.data) throw new Error('addUserEmail failed')
  const refused = await client.GET('/users/{user_id}', { params: { path: { user_id: 1 } } })
  if (!refused.error) throw new Error('reading another user was not refused')
  return report(me.data, renamed.data, listed.data, added.data, { status: refused.response.status, code: refused.error.code })
}
