import t from 'tap'
import type * as Secrets from '../../src/accounts/secrets.js'

t.test('an unknown address is verified against a dummy hash, as a known one is against its own', async (t) => {
  const verified: string[] = []
  const secrets = await t.mockImport<typeof Secrets>('../../src/accounts/secrets.js', {
    '@node-rs/argon2': {
      hash: async () => '$dummy-hash',
      verify: async (stored: string, password: string) => {
        verified.push(stored)
        return password === 'right'
      }
    }
  })
  const passwords = new secrets.Passwords()
  t.equal(await passwords.verify('$stored-hash', 'wrong'), false)
  t.equal(await passwords.verify('$stored-hash', 'right'), true)
  t.equal(await passwords.verify(undefined, 'wrong'), false, 'no user: refused')
  t.equal(await passwords.verify(undefined, 'right'), false, 'no user: refused even when the dummy hash would match')
  t.same(verified, ['$stored-hash', '$stored-hash', '$dummy-hash', '$dummy-hash'], 'every call costs one argon2 verification')
})
