import t from 'tap'
import { clientKey } from '../../src/http/client-address.js'

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
    ['', 'unknown'],
    [undefined, 'unknown']
  ]
  for (const [address, key] of cases) t.equal(clientKey(address, 64), key, `${String(address)} → ${key}`)
  t.equal(clientKey('2001:db8:1234:5678::1', 48), '2001:db8:1234::/48', 'grouped by the prefix configured')
})
