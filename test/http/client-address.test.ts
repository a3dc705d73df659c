import t from 'tap'
import { clientKey } from '../../src/http/client-address.js'
import { assertProblem, build, newUser } from '../helpers.js'

t.test('one key per client, however its address is written', async (t) => {
  const cases: Array<[string | undefined, string]> = [
    ['203.0.113.7', '203.0.113.7'],
    [' 203.0.113.7 ', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:DB8::1', '2001:db8::/64'],
    ['2001:0db8:0:0::1', '2001:db8::/64'],
    ['[2001:db8::1]', '2001:db8::/64'],
    ['2001:db8::1:2:3:4', '2001:db8::/64'],
    ['2001:db8:0:1::1', '2001:db8:0:1::/64'],
    ['fe80::1%eth0', 'fe80::/64'],
    ['Test-Peer', 'test-peer'],
    ['010.0.0.1', '010.0.0.1'],
    ['203.0.113.7:1234', '203.0.113.7'],
    ['[203.0.113.7]:1234', '203.0.113.7'],
    ['[2001:db8::1]:443', '2001:db8::/64'],
    ['2001:db8::1:443', '2001:db8::/64'],
    ['', 'unknown'],
    [undefined, 'unknown']
  ]
  for (const [address, key] of cases) t.equal(clientKey(address, 64), key, `${String(address)} → ${key}`)
  t.equal(clientKey('2001:db8:1234:5678::1', 48), '2001:db8:1234::/48', 'grouped by the prefix configured')
})

t.test('behind TRUST_PROXY, a forwarded address with a port is the same client as without it', async (t) => {
  const app = await build(t, { env: { LOGIN_MAX_FAILURES: '100', LOGIN_MAX_FAILURES_PER_CLIENT: '3', TRUST_PROXY: '10.0.0.1' } })
  const user = await newUser(app, { password: 'right-password' })
  const login = (from: string, password: string) => app.inject({
    method: 'POST', url: '/auth/tokens', payload: { email: user.email, password }, remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': from }
  })
  const fail = async (spellings: string[]) => {
    for (const from of spellings) t.equal((await login(from, 'wrong-password')).statusCode, 401, `${from}: a failure`)
  }
  await fail(['203.0.113.9:1234', '203.0.113.9:1235', '203.0.113.9:40000'])
  assertProblem(t, await login('203.0.113.9', 'right-password'), 429, 'RATE_LIMITED', 'the ports were one client')
  assertProblem(t, await login('203.0.113.9:5555', 'right-password'), 429, 'RATE_LIMITED', 'a fresh port is no fresh budget')
  await fail(['[2001:db8::1]:443', '[2001:db8::1]:444', '[2001:db8::2]:445'])
  assertProblem(t, await login('2001:db8::1', 'right-password'), 429, 'RATE_LIMITED', 'IPv6 with ports: one client')
  t.equal((await login('203.0.113.10:1234', 'right-password')).statusCode, 201, 'another client logs in')
})
