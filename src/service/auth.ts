import { timingSafeEqual } from 'node:crypto';

/** Roles an API key can hold (docs/wire-protocol.md §1.1); each route accepts a set of them. */
export type Role = 'MAPPER' | 'GENERATOR' | 'SHARER' | 'ID_READER';

export const ALL_ROLES: readonly Role[] = ['MAPPER', 'GENERATOR', 'SHARER', 'ID_READER'];

export function isRole(value: string): value is Role {
  return (ALL_ROLES as readonly string[]).includes(value);
}

/**
 * The operator trims the Authorization header, compares its first 7 characters with "bearer " ignoring case,
 * and takes the rest as the key.
 */
export function bearerKey(header: string | undefined): string | null {
  if (header === undefined) return null;
  const trimmed = header.trim();
  if (trimmed.length < 7 || trimmed.slice(0, 7).toLowerCase() !== 'bearer ') return null;
  return trimmed.slice(7);
}

/** The one API key a local service knows, with its roles. */
export class ApiKeyAuthority {
  private readonly key: Buffer;

  constructor(
    apiKey: string,
    private readonly roles: ReadonlySet<Role>,
  ) {
    this.key = Buffer.from(apiKey, 'utf8');
  }

  /** True when the header names the service's key. */
  authenticates(header: string | undefined): boolean {
    const presented = bearerKey(header);
    if (presented === null) return false;
    const bytes = Buffer.from(presented, 'utf8');
    return bytes.length === this.key.length && timingSafeEqual(bytes, this.key);
  }

  /** True when the header names the service's key and that key holds one of the roles. */
  authorizes(header: string | undefined, anyOf: readonly Role[]): boolean {
    return this.authenticates(header) && anyOf.some((role) => this.roles.has(role));
  }
}
