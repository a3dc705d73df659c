import type { UserRole } from '../../schemas/user.js'

/**
 * Who may call a route, declared in each route's `config.auth` (deny by default: a route without a rule cannot
 * be registered):
 * - public: anyone (a valid token is still recognised);
 * - caller: any authenticated caller (the service may narrow it);
 * - self-or-admin: the user named by `user_id`, or an admin;
 * - owner: only the user named by `user_id`, admins included in the refusal (version 1's rule for removing addresses);
 * - admin: admins only;
 * - scim: an identity provider's SCIM token, or an admin (/scim/v2 only: a SCIM token opens nothing else).
 */
export const AUTH_RULES = ['public', 'caller', 'self-or-admin', 'owner', 'admin', 'scim'] as const
export type AuthRule = typeof AUTH_RULES[number]

export const isAuthRule = (value: unknown): value is AuthRule => (AUTH_RULES as readonly unknown[]).includes(value)

/** Whether a caller (or nobody) passes a rule for a target user (the route's `user_id`, when it has one). */
export function allows(rule: AuthRule, caller: { id: number; role: UserRole } | null, target: number | undefined): boolean {
  if (rule === 'public') return true
  if (!caller) return false
  switch (rule) {
    case 'caller': return true
    case 'admin':
    case 'scim': return caller.role === 'admin'
    case 'self-or-admin': return caller.role === 'admin' || target === caller.id
    case 'owner': return target === caller.id
    default: return false
  }
}
