// The flow an SDK user writes with swagger-typescript-api's generated class.
import { Api, type HttpResponse, type Problem } from '../out/sta/api.js'
import { names, report, type FlowResult } from './result.js'

export async function flow(baseUrl: string, tag: string): Promise<FlowResult> {
  const n = names(tag)
  const api = new Api<string>({ baseUrl, securityWorker: (token) => (token ? { headers: { Authorization: `Bearer ${token}` } } : {}) })
  const created = await api.users.createUser({ name: n.name, email: n.email, password: n.password })
  const login = await api.auth.createToken({ email: n.email, password: n.password })
  api.setSecurityData(login.data.token)
  const me = await api.users.getUser(created.data.id)
  const listed = await api.users.listUsers({ name: `${n.name.toLowerCase()}*` })
  const renamed = await api.users.setUserName(me.data.id, { name: n.renamed })
  const added = await api.users.addUserEmail(me.data.id, { address: n.second })
  let forbidden: { status: number; code: string } | undefined
  try {
    await api.users.getUser(1)
  } catch (err) {
    const response = err as HttpResponse<unknown, Problem>
    forbidden = { status: response.status, code: response.error.code }
  }
  if (!forbidden) throw new Error('reading another user was not refused')
  return report(me.data, renamed.data, listed.data, added.data, forbidden)
}
