/** A row's country cell (ISO code, English name or a common alias a CRM writes) to the phone region it names. */
import type { PhoneRegion, UnknownCountryReason, UnknownPhoneRegion } from './phone.js';
import { phoneLibrary } from './phone-library.js';

/**
 * Names per ISO 3166 alpha-2 code: the English short name first, then the other names and abbreviations CRM
 * exports write (official long forms, former names, own-language names of the larger markets). Compared by
 * nameKey, so case, accents, `&` for `and`, `St.` for `Saint`, a leading `The` and punctuation do not matter.
 * A code needs no entry to be accepted as itself: every code the phone metadata knows is.
 */
export const COUNTRY_NAMES: Readonly<Record<string, readonly string[]>> = {
  AC: ['Ascension Island', 'Ascension'],
  AD: ['Andorra'],
  AE: ['United Arab Emirates', 'UAE', 'Emirates'],
  AF: ['Afghanistan'],
  AG: ['Antigua and Barbuda', 'Antigua'],
  AI: ['Anguilla'],
  AL: ['Albania'],
  AM: ['Armenia'],
  AO: ['Angola'],
  AR: ['Argentina'],
  AS: ['American Samoa'],
  AT: ['Austria', 'Österreich', 'Oesterreich'],
  AU: ['Australia'],
  AW: ['Aruba'],
  AX: ['Åland Islands', 'Aland'],
  AZ: ['Azerbaijan'],
  BA: ['Bosnia and Herzegovina', 'Bosnia-Herzegovina', 'Bosnia'],
  BB: ['Barbados'],
  BD: ['Bangladesh'],
  BE: ['Belgium', 'Belgique', 'België', 'Belgien'],
  BF: ['Burkina Faso'],
  BG: ['Bulgaria'],
  BH: ['Bahrain'],
  BI: ['Burundi'],
  BJ: ['Benin'],
  BL: ['Saint Barthélemy'],
  BM: ['Bermuda'],
  BN: ['Brunei', 'Brunei Darussalam'],
  BO: ['Bolivia', 'Plurinational State of Bolivia'],
  BQ: ['Caribbean Netherlands', 'Bonaire, Sint Eustatius and Saba', 'Bonaire'],
  BR: ['Brazil', 'Brasil'],
  BS: ['Bahamas'],
  BT: ['Bhutan'],
  BW: ['Botswana'],
  BY: ['Belarus'],
  BZ: ['Belize'],
  CA: ['Canada'],
  CC: ['Cocos (Keeling) Islands', 'Cocos Islands'],
  CD: ['Democratic Republic of the Congo', 'Congo - Kinshasa', 'DR Congo', 'DRC', 'Congo, Democratic Republic of the'],
  CF: ['Central African Republic'],
  CG: ['Republic of the Congo', 'Congo - Brazzaville', 'Congo', 'Congo, Republic of the'],
  CH: ['Switzerland', 'Schweiz', 'Suisse', 'Svizzera'],
  CI: ["Côte d'Ivoire", 'Ivory Coast'],
  CK: ['Cook Islands'],
  CL: ['Chile'],
  CM: ['Cameroon'],
  CN: ['China', "People's Republic of China", 'PRC', 'Mainland China'],
  CO: ['Colombia'],
  CR: ['Costa Rica'],
  CU: ['Cuba'],
  CV: ['Cape Verde', 'Cabo Verde'],
  CW: ['Curaçao'],
  CX: ['Christmas Island'],
  CY: ['Cyprus'],
  CZ: ['Czechia', 'Czech Republic'],
  DE: ['Germany', 'Deutschland', 'Federal Republic of Germany'],
  DJ: ['Djibouti'],
  DK: ['Denmark', 'Danmark'],
  DM: ['Dominica'],
  DO: ['Dominican Republic'],
  DZ: ['Algeria'],
  EC: ['Ecuador'],
  EE: ['Estonia'],
  EG: ['Egypt'],
  EH: ['Western Sahara'],
  ER: ['Eritrea'],
  ES: ['Spain', 'España'],
  ET: ['Ethiopia'],
  FI: ['Finland', 'Suomi'],
  FJ: ['Fiji'],
  FK: ['Falkland Islands', 'Falklands'],
  FM: ['Micronesia', 'Federated States of Micronesia'],
  FO: ['Faroe Islands', 'Faroes'],
  FR: ['France'],
  GA: ['Gabon'],
  GB: [
    'United Kingdom',
    'UK',
    'U.K.',
    'Great Britain',
    'Britain',
    'United Kingdom of Great Britain and Northern Ireland',
    'England',
    'Scotland',
    'Wales',
    'Northern Ireland',
  ],
  GD: ['Grenada'],
  GE: ['Georgia'],
  GF: ['French Guiana'],
  GG: ['Guernsey'],
  GH: ['Ghana'],
  GI: ['Gibraltar'],
  GL: ['Greenland'],
  GM: ['Gambia'],
  GN: ['Guinea'],
  GP: ['Guadeloupe'],
  GQ: ['Equatorial Guinea'],
  GR: ['Greece', 'Hellas'],
  GT: ['Guatemala'],
  GU: ['Guam'],
  GW: ['Guinea-Bissau'],
  GY: ['Guyana'],
  HK: ['Hong Kong', 'Hong Kong SAR China', 'Hong Kong SAR'],
  HN: ['Honduras'],
  HR: ['Croatia', 'Hrvatska'],
  HT: ['Haiti'],
  HU: ['Hungary', 'Magyarország'],
  ID: ['Indonesia'],
  IE: ['Ireland', 'Republic of Ireland', 'Éire', 'Eire'],
  IL: ['Israel'],
  IM: ['Isle of Man'],
  IN: ['India', 'Bharat'],
  IO: ['British Indian Ocean Territory'],
  IQ: ['Iraq'],
  IR: ['Iran', 'Islamic Republic of Iran', 'Iran, Islamic Republic of'],
  IS: ['Iceland'],
  IT: ['Italy', 'Italia'],
  JE: ['Jersey'],
  JM: ['Jamaica'],
  JO: ['Jordan'],
  JP: ['Japan', 'Nippon'],
  KE: ['Kenya'],
  KG: ['Kyrgyzstan'],
  KH: ['Cambodia'],
  KI: ['Kiribati'],
  KM: ['Comoros'],
  KN: ['Saint Kitts and Nevis'],
  KP: ['North Korea', 'DPRK', "Democratic People's Republic of Korea", "Korea, Democratic People's Republic of"],
  KR: ['South Korea', 'Korea', 'Republic of Korea', 'Korea, Republic of'],
  KW: ['Kuwait'],
  KY: ['Cayman Islands'],
  KZ: ['Kazakhstan'],
  LA: ['Laos', 'Lao PDR', "Lao People's Democratic Republic"],
  LB: ['Lebanon'],
  LC: ['Saint Lucia'],
  LI: ['Liechtenstein'],
  LK: ['Sri Lanka'],
  LR: ['Liberia'],
  LS: ['Lesotho'],
  LT: ['Lithuania'],
  LU: ['Luxembourg'],
  LV: ['Latvia'],
  LY: ['Libya'],
  MA: ['Morocco'],
  MC: ['Monaco'],
  MD: ['Moldova', 'Republic of Moldova', 'Moldova, Republic of'],
  ME: ['Montenegro'],
  MF: ['Saint Martin'],
  MG: ['Madagascar'],
  MH: ['Marshall Islands'],
  MK: ['North Macedonia', 'Macedonia'],
  ML: ['Mali'],
  MM: ['Myanmar', 'Burma', 'Myanmar (Burma)'],
  MN: ['Mongolia'],
  MO: ['Macao', 'Macau', 'Macao SAR China'],
  MP: ['Northern Mariana Islands'],
  MQ: ['Martinique'],
  MR: ['Mauritania'],
  MS: ['Montserrat'],
  MT: ['Malta'],
  MU: ['Mauritius'],
  MV: ['Maldives'],
  MW: ['Malawi'],
  MX: ['Mexico', 'México'],
  MY: ['Malaysia'],
  MZ: ['Mozambique'],
  NA: ['Namibia'],
  NC: ['New Caledonia'],
  NE: ['Niger'],
  NF: ['Norfolk Island'],
  NG: ['Nigeria'],
  NI: ['Nicaragua'],
  NL: ['Netherlands', 'Holland', 'Nederland'],
  NO: ['Norway', 'Norge'],
  NP: ['Nepal'],
  NR: ['Nauru'],
  NU: ['Niue'],
  NZ: ['New Zealand', 'Aotearoa'],
  OM: ['Oman'],
  PA: ['Panama'],
  PE: ['Peru'],
  PF: ['French Polynesia'],
  PG: ['Papua New Guinea'],
  PH: ['Philippines'],
  PK: ['Pakistan'],
  PL: ['Poland', 'Polska'],
  PM: ['Saint Pierre and Miquelon'],
  PR: ['Puerto Rico'],
  PS: ['Palestine', 'Palestinian Territories', 'State of Palestine'],
  PT: ['Portugal'],
  PW: ['Palau'],
  PY: ['Paraguay'],
  QA: ['Qatar'],
  RE: ['Réunion'],
  RO: ['Romania', 'România'],
  RS: ['Serbia'],
  RU: ['Russia', 'Russian Federation'],
  RW: ['Rwanda'],
  SA: ['Saudi Arabia', 'KSA', 'Kingdom of Saudi Arabia'],
  SB: ['Solomon Islands'],
  SC: ['Seychelles'],
  SD: ['Sudan'],
  SE: ['Sweden', 'Sverige'],
  SG: ['Singapore'],
  SH: ['Saint Helena'],
  SI: ['Slovenia'],
  SJ: ['Svalbard and Jan Mayen'],
  SK: ['Slovakia', 'Slovak Republic'],
  SL: ['Sierra Leone'],
  SM: ['San Marino'],
  SN: ['Senegal'],
  SO: ['Somalia'],
  SR: ['Suriname'],
  SS: ['South Sudan'],
  ST: ['São Tomé and Príncipe', 'Sao Tome and Principe'],
  SV: ['El Salvador'],
  SX: ['Sint Maarten'],
  SY: ['Syria', 'Syrian Arab Republic'],
  SZ: ['Eswatini', 'Swaziland'],
  TA: ['Tristan da Cunha'],
  TC: ['Turks and Caicos Islands'],
  TD: ['Chad'],
  TG: ['Togo'],
  TH: ['Thailand'],
  TJ: ['Tajikistan'],
  TK: ['Tokelau'],
  TL: ['Timor-Leste', 'East Timor'],
  TM: ['Turkmenistan'],
  TN: ['Tunisia'],
  TO: ['Tonga'],
  TR: ['Türkiye', 'Turkey'],
  TT: ['Trinidad and Tobago', 'Trinidad'],
  TV: ['Tuvalu'],
  TW: ['Taiwan'],
  TZ: ['Tanzania', 'United Republic of Tanzania'],
  UA: ['Ukraine'],
  UG: ['Uganda'],
  US: ['United States', 'United States of America', 'USA', 'U.S.A.', 'U.S.', 'America'],
  UY: ['Uruguay'],
  UZ: ['Uzbekistan'],
  VA: ['Vatican City', 'Holy See', 'Vatican'],
  VC: ['Saint Vincent and the Grenadines', 'Saint Vincent and Grenadines'],
  VE: ['Venezuela', 'Bolivarian Republic of Venezuela'],
  VG: ['British Virgin Islands'],
  VI: ['U.S. Virgin Islands', 'US Virgin Islands'],
  VN: ['Vietnam', 'Viet Nam'],
  VU: ['Vanuatu'],
  WF: ['Wallis and Futuna'],
  WS: ['Samoa'],
  XK: ['Kosovo'],
  YE: ['Yemen'],
  YT: ['Mayotte'],
  ZA: ['South Africa'],
  ZM: ['Zambia'],
  ZW: ['Zimbabwe'],
};

/**
 * `  Côte d’Ivoire`, `COTE D'IVOIRE` -> `cote divoire`; `St. Lucia` -> `saint lucia`; `The Bahamas` -> `bahamas`;
 * `Trinidad & Tobago` -> `trinidad and tobago`; `U.S.A.` -> `usa`: the spellings of one name meet in one key.
 */
export function nameKey(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[.'’`]/g, '')
    .replace(/&/g, ' and ')
    .replace(/[^a-z0-9]+/g, ' ')
    .trim()
    .replace(/^the /, '')
    .replace(/\bst\b/g, 'saint');
}

let byName: ReadonlyMap<string, PhoneRegion> | undefined;

/** Country names to regions, built on the first lookup by name (it needs the phone metadata). */
function regionsByName(): ReadonlyMap<string, PhoneRegion> {
  if (byName !== undefined) return byName;
  const { isSupportedCountry } = phoneLibrary();
  const map = new Map<string, PhoneRegion>();
  for (const [code, names] of Object.entries(COUNTRY_NAMES)) {
    // a table entry whose code the metadata lacks would name a region no number can be read in
    if (!isSupportedCountry(code)) continue;
    for (const name of names) map.set(nameKey(name), code as PhoneRegion);
  }
  byName = map;
  return map;
}

/**
 * The phone region a country cell names, or undefined when it names none this tool knows. An ISO 3166 alpha-2
 * code in any case (`br`, `Br`) is taken when the phone metadata knows it; anything else is looked up by name.
 */
export function regionOfCountry(cell: string): PhoneRegion | undefined {
  const text = cell.trim();
  if (text.length === 2) {
    const code = text.toUpperCase();
    if (phoneLibrary().isSupportedCountry(code)) return code as PhoneRegion;
  }
  return regionsByName().get(nameKey(text));
}

/** Longest country cell a reason repeats; a longer one is not a country's name. */
const SHOWN_COUNTRY_CHARS = 40;
/** What a country's name is written with: a cell with digits, `@` or the like is shown by no reason (it may be a phone or an email put in the wrong column). */
const COUNTRY_WRITING = /^[\p{L} .,'’()&-]+$/u;

/** Why a phone of a row whose country cell names no known country is not sent. */
export function unknownCountryReason(cell: string): UnknownCountryReason {
  const text = cell.trim();
  if (Array.from(text).length <= SHOWN_COUNTRY_CHARS && COUNTRY_WRITING.test(text))
    return `invalid phone: the row's country '${text}' is not an ISO 3166 code or a country name this tool knows`;
  return "invalid phone: the row's country is not an ISO 3166 code or a country name this tool knows";
}

/** At most this many distinct country cells are remembered: a column of junk cannot grow the memory. */
const MEMO_CELLS = 4096;
const memo = new Map<string, PhoneRegion | UnknownPhoneRegion>();

/**
 * The region a row's phones are read in, from its country cell: the country it names; `fallback` when the cell is
 * empty (or only spaces); an UnknownPhoneRegion when it names none, so that no guess is made for that row.
 */
export function phoneRegionOfRow(
  cell: string,
  fallback: PhoneRegion | undefined,
): PhoneRegion | UnknownPhoneRegion | undefined {
  const known = memo.get(cell);
  if (known !== undefined) return known;
  if (cell.trim() === '') return fallback;
  const region: PhoneRegion | UnknownPhoneRegion = regionOfCountry(cell) ?? {
    unknownCountry: unknownCountryReason(cell),
  };
  if (memo.size < MEMO_CELLS) memo.set(cell, region);
  return region;
}
