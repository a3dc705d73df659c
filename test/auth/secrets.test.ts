import t from 'tap'
import type * as Secrets from '../../src/accounts/secrets.js'

// As URLs: tap resolves a relative path from the caller's source-mapped file, which is not the compiled one that runs.
const SECRETS = new URL('../../src/accounts/secrets.js', import.meta.url).href
const PASSWORD_HASHES = new URL('../../src/accounts/password-hashes.js', import.meta.url).href

t.test('an unknown address is verified against a dummy hash, as a known one is against its own', async (t) => {
  const verified: string[] = []
  const secrets = await t.mockImport<typeof Secrets>(SECRETS, {
    '@node-rs/argon2': { hash: async () => '$dummy-hash' },
    // Every stored form is checked there, argon2id among them.
    [PASSWORD_HASHES]: {
      isNativeHash: () => true,
      verifyPasswordHash: async (stored: string, password: string) => {
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
  t.same(verified, ['$stored-hash', '$stored-hash', '$dummy-hash', '$dummy-hash'], 'every call costs one verification')
})

t.test('hashes run one a core at once, the rest waiting their turn, and every one ends', async (t) => {
  let running = 0
  let most = 0
  const held = async <T>(value: T): Promise<T> => {
    most = Math.max(most, ++running)
    await new Promise((resolve) => setImmediate(resolve))
    running--
    return value
  }
  const secrets = await t.mockImport<typeof Secrets>(SECRETS, {
    'node:os': { availableParallelism: () => 2 },
    '@node-rs/argon2': { hash: (password: string) => held(`$hash-of-${password}`) },
    [PASSWORD_HASHES]: {
      isNativeHash: () => true,
      verifyPasswordHash: (stored: string, password: string) => held(stored === `$hash-of-${password}`)
    }
  })
  const passwords = new secrets.Passwords()
  const hashes = await Promise.all(Array.from({ length: 8 }, (_, i) => passwords.hash(`p${i}`)))
  const checks = await Promise.all(hashes.map((stored, i) => passwords.verify(stored, i % 2 ? `p${i}` : 'wrong')))
  t.equal(most, 2, 'never more at once than the cores (2 here)')
  t.same(checks, [false, true, false, true, false, true, false, true], 'and each verification answers for its own hash')
})
