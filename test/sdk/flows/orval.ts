// The flow an SDK user writes with orval's generated fetch functions.
import { addUserEmail, createToken, createUser, getUser, listUsers, setUserName } from '../out/orval/roster.js'
import { names, report, type FlowResult } from './result.js'

export async function flow(baseUrl: string, tag: string): Promise<FlowResult> {
  const n = names(tag)
  const at = (path: string) => new URL(path, baseUrl).toString()
  // orval's functions fetch the paths of the document as they are: the base URL comes from a fetch of one's own.
  const real = globalThis.fetch
  let token = ''
  globalThis.fetch = (input, init) => {
    const url = typeof input === 'string' ? at(input.replace(/^https?:\/\/[^/]+/, '')) : input
    const headers = new Headers(init?.headers)
    if (token) headers.set('authorization', `Bearer ${token}`)
    return real(url, { ...init, headers })
  }
  try {
    const created = await createUser({ name: n.name, email: n.email, password: n.password })
    if (created.status !== 201) throw new Error(`createUser: ${created.status}`)
    const login = await createToken({ email: n.email, password: n.password })
    if (login.status !== 201) throw new Error(`createToken: ${login.status}`)
    token = login.data.token
    const me = await getUser(created.data.id)
    if (me.status !== 200) throw new Error(`getUser: ${me.status}`)
    const listed = await listUsers({ name: `${n.name.toLowerCase()}*` })
    if (listed.status !== 200) throw new Error(`listUsers: ${listed.status}`)
    const renamed = await setUserName(me.data.id, { name: n.renamed })
    if (renamed.status !== 200) throw new Error(`setUserName: ${renamed.status}`)
    const added = await addUserEmail(me.data.id, { address: n.second })
    if (added.status !== 201) throw new Error(`addUserEmail: ${added.status}`)
    const refused = await getUser(1)
    if (refused.status !== 401) throw new Error(`reading another user: ${refused.status}`)
    return report(me.data, renamed.data, listed.data, added.data, { status: refused.status, code: refused.data.code })
  } finally {
    globalThis.fetch = real
  }
}
