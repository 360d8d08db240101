import { IDENTIFIER_KINDS, prepareIdentifier, type DiiType, type IdentifierKind } from '../../identity/index.js';

/** The one DII of a token generate or validate request, as the operator reads it (docs/wire-protocol.md §5.1-5.2). */

export const MESSAGE_REQUIRED_DII =
  'Required Parameter Missing: exactly one of [email, email_hash, phone, phone_hash] must be specified';
export const MESSAGE_INVALID_IDENTIFIER = 'Invalid Identifier';

export type DiiReading = { ok: true; type: DiiType; hash: string } | { ok: false; message: string };

export function readDii(request: unknown): DiiReading {
  if (typeof request !== 'object' || request === null || Array.isArray(request)) {
    return { ok: false, message: MESSAGE_REQUIRED_DII };
  }
  const fields = request as Record<string, unknown>;
  // A JSON null reads as absent, as a missing key does for the operator's JsonObject.getString.
  const given = IDENTIFIER_KINDS.filter((kind) => fields[kind] !== undefined && fields[kind] !== null);
  if (given.length !== 1) return { ok: false, message: MESSAGE_REQUIRED_DII };
  const kind: IdentifierKind = given[0]!;
  const value = fields[kind];
  if (typeof value !== 'string') return { ok: false, message: MESSAGE_INVALID_IDENTIFIER };
  const prepared = prepareIdentifier(kind, value);
  return prepared.ok
    ? { ok: true, type: prepared.type, hash: prepared.hash }
    : { ok: false, message: MESSAGE_INVALID_IDENTIFIER };
}
