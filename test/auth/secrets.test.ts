import t from 'tap'

t.test('an unknown address is verified against a dummy hash, as a known one is against its own', async (t) => {
  const verified: string[] = []
  const secrets = await t.mockImport<typeof import('../../src/auth/secrets.js')>('../../src/auth/secrets.js', {
    '@node-rs/argon2': {
      hash: async () => '$dummy-hash',
      verify: async (stored: string, password: string) => {
        verified.push(stored)
        return password === 'right'
      }
    }
  })
  t.equal(await secrets.verifyPassword('$stored-hash', 'wrong'), false)
  t.equal(await secrets.verifyPassword('$stored-hash', 'right'), true)
  t.equal(await secrets.verifyPassword(undefined, 'wrong'), false, 'no user: refused')
  t.equal(await secrets.verifyPassword(undefined, 'right'), false, 'no user: refused even when the dummy hash would match')
  t.same(verified, ['$stored-hash', '$stored-hash', '$dummy-hash', '$dummy-hash'], 'every call costs one argon2 verification')
})
