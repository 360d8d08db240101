import { readFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';
import { isRawUidShape, prepareIdentifier, type IdentifierKind } from '../identity/index.js';
import type { LocalIdentityEngine } from './engine.js';
import { ServiceSetupError } from './options.js';

/**
 * Opt-outs given to the local service: rows of --optout-file and bodies of POST /_local/optout. Messages name
 * the field and never repeat the value (it may be someone's email).
 */

export const OPTOUT_FIELDS = ['email', 'phone', 'email_hash', 'phone_hash', 'advertising_id'] as const;
export type OptoutField = (typeof OPTOUT_FIELDS)[number];

export type OptoutSubject = { kind: 'identity'; hash: string } | { kind: 'advertising_id'; rawUid: string };

export function isOptoutField(name: string): name is OptoutField {
  return (OPTOUT_FIELDS as readonly string[]).includes(name);
}

/** The identity a value of one field names, or the reason it names none. */
export function readOptoutSubject(
  field: OptoutField,
  value: string,
): { ok: true; subject: OptoutSubject } | { ok: false; reason: string } {
  if (field === 'advertising_id') {
    return isRawUidShape(value)
      ? { ok: true, subject: { kind: 'advertising_id', rawUid: value } }
      : { ok: false, reason: 'advertising_id must be a raw UID (44 base64 characters)' };
  }
  const prepared = prepareIdentifier(field as IdentifierKind, value);
  return prepared.ok
    ? { ok: true, subject: { kind: 'identity', hash: prepared.hash } }
    : { ok: false, reason: `${field}: ${prepared.reason}` };
}

export function applyOptout(engine: LocalIdentityEngine, subject: OptoutSubject, sinceMs: number, nowMs: number): void {
  if (subject.kind === 'identity') engine.optOutIdentity(subject.hash, sinceMs, nowMs);
  else engine.optOutAdvertisingId(subject.rawUid, sinceMs);
}

/** Reads a since_ms value: whole non-negative milliseconds. */
export function readSinceMs(value: unknown): number | null {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? value : null;
  if (typeof value === 'string' && /^\d{1,15}$/.test(value.trim())) return Number(value.trim());
  return null;
}

/**
 * A CSV with a header naming any of email, phone, email_hash, phone_hash, advertising_id, since_ms. Every
 * non-empty identity cell opts that identity out, since since_ms of its row (default: `nowMs`).
 */
export function loadOptoutFile(path: string, engine: LocalIdentityEngine, nowMs: number): number {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ServiceSetupError(`cannot read the opt-out file ${path}${code ? ` (${code})` : ''}; check the path`);
  }
  let rows: string[][];
  try {
    rows = parse(text, { bom: true, skip_empty_lines: true, relax_column_count: false }) as string[][];
  } catch (err) {
    const line = (err as { lines?: number }).lines;
    throw new ServiceSetupError(`the opt-out file ${path} is not valid CSV${line ? ` (near line ${line})` : ''}`);
  }
  const header = rows[0];
  if (header === undefined) {
    throw new ServiceSetupError(`the opt-out file ${path} is empty; it needs a header such as "email,since_ms"`);
  }
  const columns = header.map((name) => name.trim().toLowerCase());
  const allowed = [...OPTOUT_FIELDS, 'since_ms'].join(', ');
  columns.forEach((name, i) => {
    if (name !== 'since_ms' && !isOptoutField(name)) {
      throw new ServiceSetupError(
        `the opt-out file ${path} has an unknown column "${header[i]}" in its header; allowed columns: ${allowed}`,
      );
    }
  });
  if (!columns.some(isOptoutField)) {
    throw new ServiceSetupError(
      `the opt-out file ${path} has no identity column; name at least one of ${OPTOUT_FIELDS.join(', ')}`,
    );
  }
  const sinceColumn = columns.indexOf('since_ms');
  let count = 0;
  for (let r = 1; r < rows.length; r++) {
    const row = rows[r]!;
    const where = `the opt-out file ${path}, line ${r + 1}`;
    let sinceMs = nowMs;
    if (sinceColumn >= 0 && row[sinceColumn]!.trim() !== '') {
      const parsed = readSinceMs(row[sinceColumn]);
      if (parsed === null) throw new ServiceSetupError(`${where}: since_ms must be whole Unix milliseconds`);
      sinceMs = parsed;
    }
    columns.forEach((name, c) => {
      const cell = row[c]!;
      if (!isOptoutField(name) || cell === '') return;
      const read = readOptoutSubject(name, cell);
      if (!read.ok) throw new ServiceSetupError(`${where}: ${read.reason}`);
      applyOptout(engine, read.subject, sinceMs, nowMs);
      count++;
    });
  }
  return count;
}
