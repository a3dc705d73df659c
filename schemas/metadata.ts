import { Type, type Static } from '@sinclair/typebox'
import { Href } from './common.js'

/** One part of a user's metadata: a JSON object of any JSON values. */
export type MetadataPart = Record<string, unknown>

const part = (description: string) => Type.Unsafe<MetadataPart>({
  type: 'object', additionalProperties: true,
  description: `${description}. A JSON object of any JSON values: at most METADATA_MAX_BYTES bytes as compact JSON, nested at most 10 deep`
})

export const Metadata = Type.Object(
  {
    href: Href,
    public: part('Read by the user and admins, written by admins'),
    unsafe: part('Read and written by the user and admins: the client\'s own, never to be trusted for access'),
    private: Type.Optional(part('Admins only: absent when the caller is not an admin'))
  },
  { $id: 'Metadata', description: 'What an app keeps about a user beside its name, in three parts' }
)
export type Metadata = Static<typeof Metadata>

const patchPart = (description: string) => Type.Optional(Type.Union([part(description), Type.Null()]))

/** An RFC 7396 merge patch of the metadata: each part named is merged, `null` removes a key (or empties the part). */
export const MetadataPatch = Type.Object(
  {
    public: patchPart('Merged into public (admins only); a key set to null is removed'),
    private: patchPart('Merged into private (admins only); a key set to null is removed'),
    unsafe: patchPart('Merged into unsafe; a key set to null is removed')
  },
  { $id: 'MetadataPatch', additionalProperties: false, description: 'A JSON merge patch (RFC 7396) of the metadata: a part left out is untouched' }
)
export type MetadataPatch = Static<typeof MetadataPatch>

/** The parts a PUT replaces whole; a part left out is untouched. */
export const MetadataReplacement = Type.Object(
  {
    public: Type.Optional(part('Replaces public (admins only)')),
    private: Type.Optional(part('Replaces private (admins only)')),
    unsafe: Type.Optional(part('Replaces unsafe'))
  },
  { $id: 'MetadataReplacement', additionalProperties: false, description: 'The parts to replace whole; a part left out is untouched' }
)
export type MetadataReplacement = Static<typeof MetadataReplacement>
