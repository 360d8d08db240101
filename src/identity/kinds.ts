/** The four ways an identifier can be given, as named by the API's request fields. */
export type IdentifierKind = 'email' | 'phone' | 'email_hash' | 'phone_hash';

/** What a hash stands for: the DII type. The state file and v3 map key on (type, hash). */
export type DiiType = 'email' | 'phone';

export const IDENTIFIER_KINDS: readonly IdentifierKind[] = ['email', 'phone', 'email_hash', 'phone_hash'];

export function isIdentifierKind(value: string): value is IdentifierKind {
  return (IDENTIFIER_KINDS as readonly string[]).includes(value);
}

/** The DII type behind a kind: `email` and `email_hash` are both emails. */
export function diiTypeOf(kind: IdentifierKind): DiiType {
  return kind === 'email' || kind === 'email_hash' ? 'email' : 'phone';
}

/** The request field that carries a hash of this DII type. */
export function hashKindOf(type: DiiType): 'email_hash' | 'phone_hash' {
  return type === 'email' ? 'email_hash' : 'phone_hash';
}
