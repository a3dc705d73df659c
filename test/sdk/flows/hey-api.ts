// The flow an SDK user writes with @hey-api/openapi-ts's generated functions.
import { createClient } from '../out/hey-api/client/index.js'
import { addUserEmail, createToken, createUser, getUser, listUsers, setUserName } from '../out/hey-api/sdk.gen.js'
import { names, report, type FlowResult } from './result.js'

export async function flow(baseUrl: string, tag: string): Promise<FlowResult> {
  const n = names(tag)
  const anonymous = createClient({ baseUrl })
  const created = await createUser({ client: anonymous, body: { name: n.name, email: n.email, password: n.password }, throwOnError: true })
  const login = await createToken({ client: anonymous, body: { email: n.email, password: n.password }, throwOnError: true })
  const client = createClient({ baseUrl, auth: () => login.data.token })
  const me = await getUser({ client, path: { user_id: created.data.id }, throwOnError: true })
  const listed = await listUsers({ client, query: { name: `${n.name.toLowerCase()}*` }, throwOnError: true })
  const renamed = await setUserName({ client, path: { user_id: me.data.id }, body: { name: n.renamed }, throwOnError: true })
  const added = await addUserEmail({ client, path: { user_id: me.data.id }, body: { address: n.second }, throwOnError: true })
  const refused = await getUser({ client, path: { user_id: 1 } })
  if (!refused.error) throw new Error('reading another user was not refused')
  return report(me.data, renamed.data, listed.data, added.data, { status: refused.response?.status ?? 0, code: refused.error.code })
}
