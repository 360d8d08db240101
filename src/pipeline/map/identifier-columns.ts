import {
  phoneRegionOfRow,
  prepareAuto,
  prepareIdentifier,
  type DiiType,
  type IdentifierKind,
  type PhoneRegion,
  type Prepared,
} from '../../identity/index.js';

/** What an identifier column holds; 'auto' detects each cell (email, E.164 phone or hash). */
export type ColumnKind = IdentifierKind | 'auto';

export interface IdentifierColumn {
  /** Header name, as in the input. */
  name: string;
  /** Position in InputRow.cells. */
  index: number;
  kind: ColumnKind;
  /** For 'auto': what a bare hash stands for, from the column's name; undefined means a hash is ambiguous. */
  hashType?: DiiType;
  /**
   * For 'phone' and 'auto': the country national numbers are read in (parsePhoneRegion); without it a phone
   * must already be E.164. Plain data, so it travels with the column to the row threads. With phoneRegionIndex,
   * the region of the rows whose country cell is empty.
   */
  phoneRegion?: PhoneRegion;
  /**
   * For 'phone' and 'auto': the position in InputRow.cells of the row's country (--phone-region-col), whose
   * phones are read in that country's plan (phoneRegionOfRow).
   */
  phoneRegionIndex?: number;
  /** Cells that stand for no value, besides the empty cell and NULL_MARKER (--null-value). */
  nullMarkers?: readonly string[];
}

/** How SQL unloads (Snowflake, PostgreSQL COPY, MySQL) write NULL: an identifier cell so written is missing. */
export const NULL_MARKER = '\\N';

/** An identifier cell that holds nothing to map: empty, `\N`, or a marker the user named. */
export function isMissingCell(column: IdentifierColumn, cell: string): boolean {
  if (cell.length === 0 || cell === NULL_MARKER) return true;
  return column.nullMarkers?.includes(cell) === true;
}

/** The column flags of `map`, `hash` and friends. Each named flag may be given several times. */
export interface ColumnFlags {
  emailCol?: string | readonly string[];
  phoneCol?: string | readonly string[];
  emailHashCol?: string | readonly string[];
  phoneHashCol?: string | readonly string[];
  col?: string;
  /** Only with `col`; default 'auto'. */
  type?: ColumnKind;
}

export interface ResolvedColumns {
  columns: IdentifierColumn[];
  /** For stderr when the columns were picked by name rather than given: says which and how to change it. */
  note?: string;
}

/** The identifier columns cannot be worked out: a usage problem, reported with the columns there are. */
export class ColumnError extends Error {
  constructor(
    message: string,
    readonly available: readonly string[],
  ) {
    super(message);
    this.name = 'ColumnError';
  }
}

const FLAG_OF: Record<IdentifierKind, string> = {
  email: '--email-col',
  phone: '--phone-col',
  email_hash: '--email-hash-col',
  phone_hash: '--phone-hash-col',
};

const KIND_WORDS: Record<ColumnKind, string> = {
  email: 'email',
  phone: 'phone',
  email_hash: 'email hash',
  phone_hash: 'phone hash',
  auto: 'auto-detected identifier',
};

/**
 * Words of a header name (see nameWords) and what they say a column holds. A name says so when it has words of one
 * kind, maybe a hash word, and otherwise only QUALIFIERS: `customer_email`, `EMAIL_ADDR`, `Work E-Mail`,
 * `mobile_number`, `tel`, `hashed_email_address`, `msisdn_sha256`. A word outside these (`email_opt_in`,
 * `phone_type`, `email_raw_uid`, `email_domain`) means the column holds something about the identifier, not the
 * identifier, and it is not picked.
 */
const WORD_MEANING = new Map<string, 'email' | 'phone' | 'hash' | 'email hash' | 'phone hash'>([
  ...['email', 'mail', 'emailaddress', 'emailaddr', 'mailaddress', 'courriel'].map((w) => [w, 'email'] as const),
  ...[
    'phone',
    'phonenumber',
    'phoneno',
    'telephone',
    'tel',
    'telno',
    'telefon',
    'cell',
    'cellphone',
    'cellular',
    'mobile',
    'mobil',
    'mobilephone',
    'mobilenumber',
    'mobileno',
    'msisdn',
    'handy',
  ].map((w) => [w, 'phone'] as const),
  ...['hash', 'hashed', 'sha256', 'sha'].map((w) => [w, 'hash'] as const),
  ...['emailhash', 'emailsha256', 'hashedemail'].map((w) => [w, 'email hash'] as const),
  ...['phonehash', 'phonesha256', 'hashedphone', 'msisdnhash'].map((w) => [w, 'phone hash'] as const),
]);
/** Names that are only a hash word: a column of hashes of either kind, detected per cell. */
const BARE_HASH_NAMES = new Set(['hash', 'hashed', 'sha256']);
/** Words that say whose or which identifier it is, not something else about it. */
const QUALIFIERS = new Set([
  'e',
  'address',
  'addr',
  'adr',
  'number',
  'num',
  'no',
  'nr',
  'customer',
  'cust',
  'client',
  'contact',
  'user',
  'member',
  'subscriber',
  'person',
  'account',
  'primary',
  'main',
  'work',
  'personal',
  'private',
  'home',
  'business',
  'office',
  'billing',
  'shipping',
  'plain',
  'raw',
]);

/** `E-Mail Address ` -> `e_mail_address`: header spellings vary in case, spaces and punctuation. */
function nameKey(name: string): string {
  return name
    .trim()
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');
}

/** `customerEmail`, `E-Mail Address `, `EMAIL_ADDR`, `email2` -> their lower-case words (camelCase and digits split off). */
function nameWords(name: string): string[] {
  return name
    .trim()
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .replace(/([A-Za-z])([0-9])/g, '$1_$2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== '');
}

/** What a header name says its column holds, or undefined when it says nothing clear (see WORD_MEANING). */
export function kindFromName(name: string): ColumnKind | undefined {
  if (BARE_HASH_NAMES.has(nameKey(name))) return 'auto';
  const words = nameWords(name);
  let email = false;
  let phone = false;
  let hash = false;
  for (const w of words) {
    const meaning = WORD_MEANING.get(w);
    if (meaning !== undefined) {
      email ||= meaning.startsWith('email');
      phone ||= meaning.startsWith('phone');
      hash ||= meaning.endsWith('hash');
    } else if (!QUALIFIERS.has(w) && !/^[0-9]+$/.test(w)) {
      // a word that is neither a kind nor a qualifier (opt_in, type, domain, raw_uid...) nor a column number (email2)
      return undefined;
    }
  }
  // `mobile phone` is two phone words; only an email and a phone word together is unclear
  if (email === phone) return undefined;
  if (email) return hash ? 'email_hash' : 'email';
  return hash ? 'phone_hash' : 'phone';
}

/** What a bare hash in an 'auto' column stands for, judged from the column's name. */
export function hashTypeFromName(name: string): DiiType | undefined {
  const key = nameKey(name);
  if (/phone|msisdn|mobile/.test(key)) return 'phone';
  if (/mail/.test(key)) return 'email';
  return undefined;
}

function asList(value: string | readonly string[] | undefined): readonly string[] {
  if (value === undefined) return [];
  return typeof value === 'string' ? [value] : value;
}

/**
 * Works out which columns hold identifiers. Named flags and `--col`/`--type` may be combined and repeated;
 * with none, the one column whose name says email/phone/hash is picked and `note` says so.
 */
export function resolveIdentifierColumns(
  header: readonly string[],
  flags: ColumnFlags,
  source = 'the input',
): ResolvedColumns {
  if (flags.type !== undefined && flags.col === undefined) {
    throw new ColumnError(
      `--type goes with --col NAME (e.g. --col ${header[0] ?? 'value'} --type ${flags.type})`,
      header,
    );
  }
  const requested: Array<{ name: string; kind: ColumnKind; flag: string }> = [];
  for (const kind of ['email', 'phone', 'email_hash', 'phone_hash'] as const) {
    const flagValue = {
      email: flags.emailCol,
      phone: flags.phoneCol,
      email_hash: flags.emailHashCol,
      phone_hash: flags.phoneHashCol,
    }[kind];
    for (const name of asList(flagValue)) requested.push({ name, kind, flag: FLAG_OF[kind] });
  }
  if (flags.col !== undefined) {
    // `--col hash` alone: the name says hashes but not of what, and a guess would map hashes to the wrong people
    if (flags.type === undefined && kindFromName(flags.col) === 'auto' && hashTypeFromName(flags.col) === undefined) {
      throw new ColumnError(`--col ${quoteArg(flags.col)}: ${unknownHashText(flags.col)}`, header);
    }
    requested.push({ name: flags.col, kind: flags.type ?? 'auto', flag: '--col' });
  }

  if (requested.length === 0) return pickByName(header, source);

  const columns: IdentifierColumn[] = [];
  for (const r of requested) {
    const index = findColumn(header, r.name, r.flag, source);
    const taken = columns.find((c) => c.index === index);
    if (taken !== undefined) {
      throw new ColumnError(
        `column '${header[index]}' is named twice (as ${KIND_WORDS[taken.kind]} and as ${KIND_WORDS[r.kind]}); give each column once`,
        header,
      );
    }
    columns.push(describeColumn(header[index], index, r.kind));
  }
  return { columns };
}

function describeColumn(name: string, index: number, kind: ColumnKind): IdentifierColumn {
  if (kind !== 'auto') return { name, index, kind };
  const hashType = hashTypeFromName(name);
  return hashType === undefined ? { name, index, kind } : { name, index, kind, hashType };
}

/** Exact name first; otherwise a unique match ignoring case and surrounding spaces. Throws a ColumnError naming `flag`. */
export function findColumn(header: readonly string[], wanted: string, flag: string, source: string): number {
  const exact = header.indexOf(wanted);
  if (exact !== -1) return exact;
  const folded = wanted.trim().toLowerCase();
  const loose = header.flatMap((h, i) => (h.trim().toLowerCase() === folded ? [i] : []));
  if (loose.length === 1) return loose[0];
  if (loose.length > 1) {
    throw new ColumnError(
      `${flag} '${wanted}' matches several columns (${loose.map((i) => `'${header[i]}'`).join(', ')}); give the exact name`,
      header,
    );
  }
  throw new ColumnError(
    `${flag}: ${source} has no column '${wanted}'; ${availableText(header)}${delimiterHint(header)}`,
    header,
  );
}

function pickByName(header: readonly string[], source: string): ResolvedColumns {
  const candidates = header.flatMap((name, index) => {
    const kind = kindFromName(name);
    return kind === undefined ? [] : [describeColumn(name, index, kind)];
  });
  if (candidates.length === 1) {
    const [c] = candidates;
    let note: string;
    if (c.kind !== 'auto')
      note = `using column '${c.name}' as ${KIND_WORDS[c.kind]} (for another column: ${FLAG_OF[c.kind]} NAME)`;
    else if (c.hashType !== undefined)
      note = `using column '${c.name}', detecting each cell; hashes in it are taken as ${c.hashType} hashes`;
    else throw new ColumnError(`column '${c.name}' of ${source}: ${unknownHashText(c.name)}`, header);
    return { columns: candidates, note };
  }
  if (candidates.length === 0) {
    if (header.length === 0)
      throw new ColumnError(`${source} is empty: there is no header to find an identifier column in`, header);
    throw new ColumnError(
      `no identifier column found in ${source}; ${availableText(header)}${delimiterHint(header)}. Name one with --email-col, --phone-col, --email-hash-col, --phone-hash-col, or --col NAME --type auto`,
      header,
    );
  }
  const flags = candidates
    .map((c) => {
      if (c.kind !== 'auto') return `${FLAG_OF[c.kind]} ${quoteArg(c.name)}`;
      // a bare hash column: the flag that says which hashes it holds
      return c.hashType === undefined ? `--email-hash-col ${quoteArg(c.name)}` : `--col ${quoteArg(c.name)}`;
    })
    .join(' ');
  // Columns whose names each say one kind, no two the same (email, phone, email_hash): nothing to guess, so map
  // them all, as a user would with the flags, and say so. A bare "hash" column or two email columns stay a question.
  const kinds = new Set(candidates.map((c) => c.kind));
  if (!kinds.has('auto') && kinds.size === candidates.length) {
    return {
      columns: candidates,
      note: `using columns ${candidates.map((c) => `'${c.name}' as ${KIND_WORDS[c.kind]}`).join(', ')} (to choose: ${flags})`,
    };
  }
  throw new ColumnError(
    `several columns of ${source} look like identifiers (${candidates.map((c) => `'${c.name}'`).join(', ')}); say which to use, e.g. ${flags} (several flags at once are allowed)`,
    header,
  );
}

/** Why a column named like `hash` is not used as it is, and the flags that say what it holds. */
function unknownHashText(name: string): string {
  const arg = quoteArg(name);
  return (
    `its name says hashes but not of what, and a guess could map them to other people; say which: ` +
    `--email-hash-col ${arg} or --phone-hash-col ${arg} (or --col ${arg} --type auto to detect each cell and leave bare hashes invalid)`
  );
}

function quoteArg(name: string): string {
  return /^[A-Za-z0-9_.-]+$/.test(name) ? name : `'${name.replace(/'/g, `'\\''`)}'`;
}

/** Characters of a header name a message shows: a binary "header" of a wrong file must not fill the terminal. */
const SHOWN_NAME_CHARS = 80;

function shownName(name: string): string {
  const chars = Array.from(name);
  return chars.length > SHOWN_NAME_CHARS ? `${chars.slice(0, SHOWN_NAME_CHARS).join('')}…` : name;
}

function availableText(header: readonly string[]): string {
  if (header.length === 0) return 'it has no columns';
  const shown = header
    .slice(0, 20)
    .map((h) => `'${shownName(h)}'`)
    .join(', ');
  return `its columns are ${shown}${header.length > 20 ? ` and ${header.length - 20} more` : ''}`;
}

/** A single header cell with `;` or a tab in it means the file was split on the wrong delimiter. */
function delimiterHint(header: readonly string[]): string {
  if (header.length !== 1) return '';
  const only = header[0];
  for (const [ch, arg] of [
    [';', '";"'],
    ['\t', 'tab'],
    ['|', '"|"'],
  ] as const) {
    if (only.includes(ch)) return ` (the header was not split: add --delimiter ${arg})`;
  }
  return '';
}

/**
 * One identifier cell as the service would get it: its DII type and hash, or why it is invalid. `countryCell` is
 * the row's cell in the column's phoneRegionIndex (see countryCellOf), read only when the column has one.
 */
export function prepareCell(column: IdentifierColumn, value: string, countryCell = ''): Prepared {
  // the column is its own options object (its phoneRegion), so no object is made per cell without a region column
  const options =
    column.phoneRegionIndex === undefined
      ? column
      : {
          // a country cell that holds nothing leaves the row to the column's phoneRegion (the fallback)
          phoneRegion: phoneRegionOfRow(isMissingCell(column, countryCell) ? '' : countryCell, column.phoneRegion),
        };
  return column.kind === 'auto'
    ? prepareAuto(value, column.hashType, options)
    : prepareIdentifier(column.kind, value, options);
}

/** The row's country cell for prepareCell: '' when the column has no phoneRegionIndex (or the row is short). */
export function countryCellOf(column: IdentifierColumn, cells: readonly string[]): string {
  return column.phoneRegionIndex === undefined ? '' : (cells[column.phoneRegionIndex] ?? '');
}

/**
 * `Email Address` -> `Email_Address`: a name with its spaces and punctuation (any run of characters other than
 * letters, digits and `_`) turned into one `_`, and none at either end, so that a column named from it needs no
 * quoting in a warehouse. Case is kept.
 */
export function sanitizedName(name: string): string {
  return name.replace(/[^\p{L}\p{N}_]+/gu, '_').replace(/^_+|_+$/g, '');
}

/** A prefix made of a name: sanitized, then `_` to join it to the field (`uid2` -> `uid2_`). */
function prefixFrom(name: string, position: number): string {
  const clean = sanitizedName(name);
  // a name of punctuation only still gives each identifier column prefixes of its own
  return `${clean === '' ? `identifier${position + 1}` : clean}_`;
}

/** A --result-prefix as used for the identifier column at `position`: sanitized and joined by `_`; '' means none. */
export function resultPrefix(prefix: string, position: number): string {
  return prefix === '' ? '' : prefixFrom(prefix, position);
}

/**
 * The default prefixes of the result columns: none for a single identifier column (`raw_uid`...), and the
 * sanitized column name for several (`Email Address` -> `Email_Address_raw_uid`).
 */
export function defaultResultPrefixes(columns: readonly { name: string }[]): string[] {
  return columns.map((column, position) => (columns.length > 1 ? prefixFrom(column.name, position) : ''));
}

/**
 * The output header: the input's columns unchanged, then `fields` per identifier column, each named
 * `<prefix><field>` (defaultResultPrefixes unless given). A result name that an input column (or an earlier
 * result column) already has gets `_2` (`_3`...), so no two output columns share a name (JSONL keys would
 * overwrite each other).
 */
export function resultHeader(
  inputHeader: readonly string[],
  columns: readonly { name: string }[],
  fields: readonly string[],
  prefixes: readonly string[] = defaultResultPrefixes(columns),
): string[] {
  const header = inputHeader.slice();
  const taken = new Set(header);
  for (let c = 0; c < columns.length; c++) {
    for (const field of fields) {
      const base = `${prefixes[c] ?? ''}${field}`;
      let name = base;
      for (let k = 2; taken.has(name); k++) name = `${base}_${k}`;
      taken.add(name);
      header.push(name);
    }
  }
  return header;
}
