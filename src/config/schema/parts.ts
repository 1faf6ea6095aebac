/**
 * The building blocks of the configuration file's schema (file.ts): durations, names and
 * header names as the file writes them, closed objects, maps, rates and sections with defaults.
 */
import Type, { type Static, type TSchema } from 'typebox';
import { DURATION_PATTERN } from '../../duration.js';

export const duration = (options: { default?: string; description?: string } = {}) =>
  Type.String({ pattern: DURATION_PATTERN, errorMessage: { pattern: 'must be a duration such as 500ms, 30s, 1m, 1h' }, ...options });
export const slug = Type.String({ pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', maxLength: 64 });
export const header = Type.String({ pattern: '^[A-Za-z0-9-]+$' });
export const closed = { additionalProperties: false } as const;
/** An object of any keys whose values all follow `value` (JSON Schema's additionalProperties). */
export const mapOf = <V extends TSchema>(value: V, options: Record<string, unknown> = {}) =>
  Type.Unsafe<Record<string, Static<V>>>({ type: 'object', additionalProperties: value, ...options });

export const Rate = Type.Object({ max: Type.Integer({ minimum: 1 }), per: duration() }, closed);

/** A section of the file: closed, `{}` by default, so a file that names one field keeps the others. */
export const section = { ...closed, default: {} } as const;
