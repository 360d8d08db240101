/** The roles `doctor` can check, and how `--roles` names them. */
import type { Role } from '../../pipeline/jobs/service-checks.js';
import { UserError } from '../shared/exit-codes.js';

export type { Role } from '../../pipeline/jobs/service-checks.js';
export const ROLES: readonly Role[] = ['mapper', 'generator', 'optout'];

export function parseRoles(value: string): Role[] {
  const roles = value
    .split(',')
    .map((r) => r.trim().toLowerCase())
    .filter(Boolean);
  const unknown = roles.filter((r) => !(ROLES as readonly string[]).includes(r));
  if (unknown.length > 0 || roles.length === 0)
    throw new UserError(`--roles takes a comma list of ${ROLES.join(', ')}`);
  return [...new Set(roles)] as Role[];
}
