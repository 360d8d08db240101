import type { LocalIdentityEngine, MappingInstant } from '../engine.js';

/**
 * What an endpoint handler gives the HTTP core: a 200 JSON text to encrypt (built as text because map answers
 * are large and their strings need no escaping) or a plain client_error.
 */
export type ApiAnswer = { http: 200; json: string } | { http: 400; json: { status: 'client_error'; message: string } };

export interface HandlerContext {
  engine: LocalIdentityEngine;
  at: MappingInstant;
  /** Identity-map items per request (v2 and v3 together counted per request). */
  maxMapItems: number;
}

export function clientError(message: string): ApiAnswer {
  return { http: 400, json: { status: 'client_error', message } };
}

export function success(bodyJson: string): ApiAnswer {
  return { http: 200, json: `{"status":"success","body":${bodyJson}}` };
}

export const PAYLOAD_TOO_LARGE = 'Request payload is too large';
