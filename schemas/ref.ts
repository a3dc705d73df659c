import { Type, type Static, type TSchema } from '@sinclair/typebox'

/**
 * A reference to a shared schema by its `$id`, typed as the schema it points to.
 * Routes use it so the OpenAPI document names the component instead of inlining a copy.
 */
export function ref<T extends TSchema>(schema: T) {
  if (!schema.$id) throw new Error('ref() needs a schema with an $id')
  return Type.Unsafe<Static<T>>(Type.Ref(schema.$id))
}

/** A string enum (`{ type: 'string', enum: [...] }`): what SDK generators turn into a proper enum type. */
export function stringEnum<const T extends readonly string[]>(values: T, options: { $id?: string; description?: string } = {}) {
  return Type.Unsafe<T[number]>({ ...options, type: 'string', enum: [...values] })
}
