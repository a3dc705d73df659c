// The flow an SDK user writes with openapi-typescript-codegen's generated services.
import { ApiError, AuthService, EmailsService, OpenAPI, type Problem, UsersService } from '../out/codegen/index.js'
import { names, report, type FlowResult } from './result.js'

export async function flow(baseUrl: string, tag: string): Promise<FlowResult> {
  const n = names(tag)
  OpenAPI.BASE = baseUrl
  OpenAPI.TOKEN = undefined
  const created = await UsersService.createUser({ name: n.name, email: n.email, password: n.password })
  const login = await AuthService.createToken({ email: n.email, password: n.password })
  OpenAPI.TOKEN = login.token
  const me = await UsersService.getUser(created.id)
  const listed = await UsersService.listUsers(undefined, undefined, `${n.name.toLowerCase()}*`)
  const renamed = await UsersService.setUserName(me.id, { name: n.renamed })
  const added = await EmailsService.addUserEmail(me.id, { address: n.second })
  let forbidden: { status: number; code: string } | undefined
  try {
    await UsersService.getUser(1)
  } catch (err) {
    if (!(err instanceof ApiError)) throw err
    forbidden = { status: err.status, code: (err.body as Problem).code }
  }
  if (!forbidden) throw new Error('reading another user was not refused')
  return report(me, renamed, listed, added, forbidden)
}
