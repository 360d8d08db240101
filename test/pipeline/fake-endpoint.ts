import type { DiiType } from '../../src/identity/index.js';
import type { MapV3Item, MapV3Request, MapV3ResponseBody } from '../../src/protocol/index.js';

/** What the fake endpoints share: the wait of a request on the wire, and a v3 map answer made per hash. */

/** Waits `ms` like a request in flight; rejects at once when the run aborts it, as the client does. */
export function waitOrAbort(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(t);
      reject(new Error('aborted'));
    };
    const t = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A v3 map response to a request of hashes, answered hash by hash in request order. */
export function answerHashes(
  request: MapV3Request,
  answer: (type: DiiType, hash: string) => MapV3Item,
): MapV3ResponseBody {
  return {
    email: [],
    phone: [],
    email_hash: (request.email_hash ?? []).map((h) => answer('email', h)),
    phone_hash: (request.phone_hash ?? []).map((h) => answer('phone', h)),
  };
}
