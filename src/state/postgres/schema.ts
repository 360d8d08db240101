/**
 * The tables of a PostgreSQL state and the checksum of its entry rows. One column per value (SQL filters on r,
 * on ids and on raw UIDs), keyed by (type, hash); the id orders the opt-out sweep and exports.
 */
import type { StateRecord } from '../backend.js';
import { checksumOf } from '../checksum.js';
import { STATUS_CODE, TYPE_CODE } from '../schema.js';

/** The schema a new state is made at and the only one this build reads. */
export const PG_SCHEMA_VERSION = 1;

/** The entry columns in the order every read of a whole row selects them (rowOf reads them so). */
export const ENTRY_COLUMNS =
  'id, type, hash, status, due, u, p, r, bucket_id, last_mapped, last_optout_check, opted_out_since, sum';

/** The statements that make a state in schema `s` (an identifier parseStateUrl checked). */
export function schemaDdl(s: string): string {
  return `
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL,
  sum   bigint NOT NULL
);
CREATE TABLE ${s}.entries (
  id                bigserial PRIMARY KEY,
  type              smallint NOT NULL,
  hash              text COLLATE "C" NOT NULL,
  status            smallint NOT NULL,
  due               boolean NOT NULL,
  u                 text,
  p                 text,
  r                 double precision,
  bucket_id         text,
  last_mapped       double precision,
  last_optout_check double precision,
  opted_out_since   double precision,
  sum               integer NOT NULL,
  UNIQUE (type, hash)
);
CREATE INDEX entries_by_r ON ${s}.entries (r, id) WHERE r IS NOT NULL;
CREATE TABLE ${s}.runs (
  id          bigserial PRIMARY KEY,
  command     text NOT NULL,
  args        text NOT NULL,
  pid         integer NOT NULL,
  started_at  double precision NOT NULL,
  now         double precision NOT NULL,
  finished_at double precision,
  summary     text,
  exit_code   integer
);
CREATE TABLE ${s}.pending_changes (
  id         bigserial PRIMARY KEY,
  run_id     bigint NOT NULL,
  kind       text NOT NULL,
  row        text NOT NULL,
  sum        bigint NOT NULL,
  created_at double precision NOT NULL
);
CREATE INDEX pending_changes_by_kind ON ${s}.pending_changes (kind, id);
`;
}

/**
 * An entry row's checksum (as a signed 32-bit integer, the column's type): over every value, so that a value
 * changed, or moved to another column or row, reads as damage.
 */
export function entrySumOf(e: StateRecord): number {
  return (
    checksumOf(
      JSON.stringify([
        TYPE_CODE[e.type],
        e.hash,
        STATUS_CODE[e.status],
        e.due ? 1 : 0,
        e.u,
        e.p,
        e.r,
        e.bucketId,
        e.lastMappedS,
        e.lastOptoutCheckS,
        e.optedOutSinceMs,
      ]),
    ) | 0
  );
}
