/** A `postgres://` state URL read: where to connect, which schema holds the state, and how messages show it. */
import { StateSettingError } from '../errors.js';

/** The schema a URL without `?schema=` names. */
export const DEFAULT_SCHEMA = 'uid2_batch';

// an unquoted PostgreSQL identifier of at most 63 bytes: the schema's name goes into statements as it is
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

export interface StateUrl {
  /** The URL the driver connects with (without `schema`). */
  connect: string;
  schema: string;
  /** The URL as messages show it: without its password. */
  where: string;
}

/** The URL without a password, in the user part or a `password` parameter (user and everything else kept). */
export function withoutPassword(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:@/]*):[^@/]*@/i, '$1@').replace(/([?&])password=[^&]*(&|$)/gi, '$1');
}

/** Reads `postgres://user:pass@host:port/db?schema=S`; throws StateSettingError for a URL that cannot be used. */
export function parseStateUrl(url: string): StateUrl {
  const where = withoutPassword(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new StateSettingError(
      `state ${where} is not a valid URL; write it as postgres://USER@HOST:PORT/DATABASE?schema=NAME`,
      where,
    );
  }
  const schema = parsed.searchParams.get('schema') ?? DEFAULT_SCHEMA;
  if (!SCHEMA_NAME.test(schema)) {
    throw new StateSettingError(
      `state ${where}: schema '${schema}' is not a plain name; use lower-case letters, digits and _ (at most 63)`,
      where,
    );
  }
  parsed.searchParams.delete('schema');
  return { connect: parsed.toString(), schema, where };
}
