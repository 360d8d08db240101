import type { TokenHandlerDeps, TokenHandlers } from '../contracts.js';

// Placeholder until the token part lands: answers like an operator with no active key.
export function createTokenHandlers(deps: TokenHandlerDeps): TokenHandlers {
  void deps;
  const noKey = { http: 500 as const, json: { status: 'unknown', message: 'No active encryption key available' } };
  return { generate: () => noKey, validate: () => noKey, refresh: () => noKey };
}
