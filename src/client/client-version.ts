import { readFileSync } from 'node:fs';

/**
 * The X-UID2-Client-Version value, `uid2-batch-<version>`: the operator only counts it in metrics, so an unreadable
 * package.json must not stop a call. The path is the same from src/client (tests) and dist/client (the CLI).
 */
export const CLIENT_VERSION = `uid2-batch-${readPackageVersion()}`;

function readPackageVersion(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const version = pkg && typeof pkg === 'object' ? (pkg as { version?: unknown }).version : undefined;
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}
