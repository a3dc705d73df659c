import { InvalidInput } from '../common/errors.js'

/** SCIM's kinds of a 400 (RFC 7644 §3.12) that Roster answers. */
export type ScimType = 'invalidValue' | 'invalidSyntax' | 'invalidFilter' | 'invalidPath' | 'noTarget' | 'mutability'

/** A SCIM request Roster refuses, with SCIM's word for why; src/http/scim-errors.ts answers it. */
export class ScimInvalid extends InvalidInput {
  constructor(readonly scimType: ScimType, detail: string) {
    super(detail, [], scimType === 'invalidFilter' ? 'INVALID_FILTER' : 'VALIDATION_FAILED')
  }
}

export const invalidValue = (detail: string) => new ScimInvalid('invalidValue', detail)
export const invalidSyntax = (detail: string) => new ScimInvalid('invalidSyntax', detail)
