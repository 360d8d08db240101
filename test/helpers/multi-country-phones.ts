// A CRM-like file of phones of many countries with a country column, and what libphonenumber-js itself reads each
// row's phone as, in that row's country: the expectation --phone-region-col is checked against.
import { createRequire } from 'node:module';
import { getExampleNumber, parsePhoneNumberWithError, type CountryCode, type Examples } from 'libphonenumber-js/max';

const examples = createRequire(import.meta.url)('libphonenumber-js/examples.mobile.json') as Examples;

/** Countries and how CRMs write them (the test's own spellings, not the tool's table). */
const COUNTRIES: ReadonlyArray<{ code: CountryCode; written: readonly string[] }> = [
  { code: 'US', written: ['US', 'us', 'United States', 'USA', 'United States of America'] },
  { code: 'GB', written: ['GB', 'United Kingdom', 'UK', 'Great Britain'] },
  { code: 'DE', written: ['DE', 'Germany', 'Deutschland'] },
  { code: 'FR', written: ['FR', 'France', 'fr'] },
  { code: 'BR', written: ['BR', 'Brazil', 'Brasil'] },
  { code: 'IN', written: ['IN', 'India'] },
  { code: 'JP', written: ['JP', 'Japan'] },
  { code: 'AU', written: ['AU', 'Australia'] },
  { code: 'MX', written: ['MX', 'Mexico', 'México'] },
  { code: 'ES', written: ['ES', 'Spain', 'España'] },
  { code: 'IT', written: ['IT', 'Italy'] },
  { code: 'NL', written: ['NL', 'Netherlands', 'The Netherlands'] },
  { code: 'ZA', written: ['ZA', 'South Africa'] },
  { code: 'KR', written: ['KR', 'South Korea'] },
];

/** A row of the file: the cells as written, and the region the test reads the country cell as. */
export interface CountryRow {
  id: string;
  country: string;
  phone: string;
  /** undefined: the row's country names none (its phone must be invalid, naming the cell). */
  region: CountryCode | undefined;
}

/** Numbers written with another country's code: each must keep that country, whatever the row's country. */
const FOREIGN: ReadonlyArray<Omit<CountryRow, 'id'>> = [
  { country: 'United States', phone: '+55 21 2690-3311', region: 'US' },
  { country: 'Germany', phone: '0055 21 2690 3311', region: 'DE' },
  { country: 'France', phone: '0044 20 7946 0958', region: 'FR' },
  { country: 'US', phone: '011 44 20 7946 0958', region: 'US' },
  { country: 'Japan', phone: '010 44 20 7946 0958', region: 'JP' },
  { country: 'GB', phone: '00 91 90685 36153', region: 'GB' },
  // the two numbers that --phone-region US read as American ones
  { country: 'Brazil', phone: '(21) 2690-3311', region: 'BR' },
  { country: 'India', phone: '90685 36153', region: 'IN' },
];

export function countryRows(): CountryRow[] {
  const rows: CountryRow[] = [];
  for (const { code, written } of COUNTRIES) {
    const example = getExampleNumber(code, examples);
    if (example === undefined) throw new Error(`no example number for ${code}`);
    const forms = [example.formatNational(), example.formatInternational(), example.number];
    forms.forEach((phone, i) => {
      rows.push({ id: '', country: written[i % written.length], phone, region: code });
    });
    // each spelling of the country with the national form
    for (const country of written) rows.push({ id: '', country, phone: example.formatNational(), region: code });
  }
  rows.push(...FOREIGN.map((r) => ({ ...r, id: '' })));
  // a country the tool cannot know: never read in another plan
  rows.push({ id: '', country: 'Narnia', phone: '(21) 2690-3311', region: undefined });
  // no country: the fallback region (--phone-region US in the tests)
  rows.push({ id: '', country: '', phone: '(617) 555-0102', region: 'US' });
  return rows.map((r, i) => ({ ...r, id: `c${String(i).padStart(3, '0')}` }));
}

/** What libphonenumber-js reads the phone as in the row's country: E.164, or null for a number it calls invalid. */
export function expectedE164(row: Pick<CountryRow, 'phone' | 'region'>): string | null {
  if (row.region === undefined) return null;
  try {
    const parsed = parsePhoneNumberWithError(row.phone, { defaultCountry: row.region, extract: false });
    return parsed.isValid() ? parsed.number : null;
  } catch {
    return null;
  }
}

function csvCell(cell: string): string {
  return /[",\n]/.test(cell) ? `"${cell.replace(/"/g, '""')}"` : cell;
}

export function countryCsv(rows: readonly CountryRow[]): string {
  return `id,Country,phone\n${rows.map((r) => [r.id, r.country, r.phone].map(csvCell).join(',')).join('\n')}\n`;
}

export function countryJsonl(rows: readonly CountryRow[]): string {
  return `${rows.map((r) => JSON.stringify({ id: r.id, Country: r.country, phone: r.phone })).join('\n')}\n`;
}
