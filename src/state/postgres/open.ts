/** Opens a state kept in a PostgreSQL schema: connects, makes the schema on first use, and checks what it is. */
import postgres from 'postgres';
import type { StateBackend } from '../backend.js';
import { ChecksumError } from '../checksum.js';
import { StateDamagedError, StateEnvMismatchError, StateFormatError, StateNotFoundError } from '../errors.js';
import { checkedMetaValue, metaSumOf } from '../meta-values.js';
import { APPLICATION_ID, META_KEYS } from '../schema.js';
import type { OpenStateOptions } from '../types.js';
import { connectionFault } from './errors.js';
import { PG_SCHEMA_VERSION, schemaDdl } from './schema.js';
import { COMMIT_SESSIONS, LOOKUP_SESSIONS, PostgresState } from './store.js';
import { parseStateUrl } from './url.js';

// how long a connection attempt may take before the server counts as unreachable
const CONNECT_TIMEOUT_S = 10;

/**
 * The state in the schema the URL names (created on first use unless `create: false` or read-only), refused when
 * it is not a uid2-batch state, of another schema version, or of another environment. Connection faults are one
 * line each (errors.ts).
 */
export async function openPostgresState(url: string, options: OpenStateOptions): Promise<StateBackend> {
  const { connect, schema, where } = parseStateUrl(url);
  const readonly = options.readonly === true;
  const create = options.create !== false && !readonly;
  const settings = {
    max_lifetime: null,
    idle_timeout: 0,
    connect_timeout: CONNECT_TIMEOUT_S,
    onnotice: () => {},
    connection: { application_name: 'uid2-batch' },
  };
  // one session: a sweep's advisory lock lives as long as it does
  const sql = postgres(connect, { ...settings, max: 1 });
  try {
    await checkSchema(sql, schema, where, create, options);
  } catch (err) {
    await sql.end({ timeout: 1 }).catch(() => {});
    if (err instanceof ChecksumError) throw new StateDamagedError(where, err.what);
    throw connectionFault(err, where, false) ?? err;
  }
  // lookups read on sessions of their own, connected at the first (a run that looks nothing up opens none): the
  // server answers a lookup's parts on two of its processes at once, and never behind a commit in progress
  const lookups = postgres(connect, { ...settings, max: LOOKUP_SESSIONS });
  // commits of answered batches run on sessions of their own too, connected at the first, several at once
  const commits = postgres(connect, { ...settings, max: COMMIT_SESSIONS });
  return new PostgresState({ sql, lookups, commits, schema, where, readonly });
}

/** Makes the schema when it has no state yet (one opener at a time, under a lock), then checks its meta values. */
async function checkSchema(
  sql: postgres.Sql,
  schema: string,
  where: string,
  create: boolean,
  options: OpenStateOptions,
): Promise<void> {
  const exists = async (q: postgres.Sql | postgres.TransactionSql): Promise<boolean> =>
    (await q.unsafe('SELECT to_regclass($1) IS NOT NULL AS found', [`${schema}.meta`]))[0].found === true;
  if (!(await exists(sql))) {
    if (!create) {
      throw new StateNotFoundError(
        where,
        `state ${where} has no uid2-batch state in schema ${schema}; create it with \`uid2-batch map --state URL\` first, or check the URL's schema`,
      );
    }
    // locked before the transaction begins: one begun while waiting could miss the schema the lock's holder made
    const creating = [`uid2-batch create ${schema}`];
    await sql.unsafe('SELECT pg_advisory_lock(hashtext($1))', creating);
    try {
      await sql.begin(async (t) => {
        if (await exists(t)) return;
        await t.unsafe(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
        await t.unsafe(schemaDdl(schema));
        const values: [string, string][] = [
          [META_KEYS.application, APPLICATION_ID],
          [META_KEYS.schemaVersion, String(PG_SCHEMA_VERSION)],
          [META_KEYS.envFingerprint, options.envFingerprint],
          [META_KEYS.api, options.api ?? 'v3'],
          [META_KEYS.createdAt, options.createdAt ?? new Date().toISOString()],
        ];
        const insert = `INSERT INTO ${schema}.meta (key, value, sum) VALUES ($1, $2, $3)`;
        for (const [key, value] of values) await t.unsafe(insert, [key, value, metaSumOf(key, value)]);
      });
    } finally {
      await sql.unsafe('SELECT pg_advisory_unlock(hashtext($1))', creating);
    }
  }
  const columns = await sql.unsafe(
    'SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2',
    [schema, 'meta'],
  );
  if (!columns.some((c) => c.column_name === 'sum')) {
    throw new StateFormatError(
      `state ${where} was made by an earlier build (its meta values have no checksums); map again into another schema (?schema=NAME)`,
      where,
    );
  }
  const meta = new Map<string, string>();
  for (const row of await sql.unsafe(`SELECT key, value, sum FROM ${schema}.meta`)) {
    meta.set(row.key, checkedMetaValue(row.key, [row.value, Number(row.sum)]) ?? '');
  }
  if (meta.get(META_KEYS.application) !== APPLICATION_ID) {
    throw new StateFormatError(
      `${where}: schema ${schema} is not a uid2-batch state; name another schema in the URL (?schema=NAME)`,
      where,
    );
  }
  const version = Number(meta.get(META_KEYS.schemaVersion));
  if (version > PG_SCHEMA_VERSION) {
    throw new StateFormatError(
      `state ${where} has schema version ${version}, newer than this uid2-batch reads (${PG_SCHEMA_VERSION}); upgrade uid2-batch`,
      where,
    );
  }
  if (version !== PG_SCHEMA_VERSION) {
    throw new StateFormatError(
      `state ${where} has schema version ${meta.get(META_KEYS.schemaVersion)}, made by an earlier build; map again into another schema (?schema=NAME)`,
      where,
    );
  }
  const stored = meta.get(META_KEYS.envFingerprint) ?? '';
  const refused = stored !== options.envFingerprint && options.anyEnvironment !== true;
  if (refused) throw new StateEnvMismatchError(where, stored, options.envFingerprint);
}
