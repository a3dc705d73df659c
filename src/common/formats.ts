import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'
import { Address, Timestamp } from '../../schemas/common.js'

const ajv = new Ajv({ strict: false })
addFormats.default(ajv)

/** Whether a value is an address as the API's schemas take one, for addresses that come in another way (SCIM, imports). */
export const isAddress: (value: unknown) => value is string = ajv.compile<string>(Address)

/** Whether a value is an RFC 3339 time as the API's schemas take one (a real day, a zone), for times inside a filter. */
export const isTimestamp: (value: unknown) => value is string = ajv.compile<string>(Timestamp)
