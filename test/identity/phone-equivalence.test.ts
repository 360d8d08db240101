/**
 * normalizePhone against libphonenumber-js called directly, over tens of thousands of generated cells: whatever
 * shortcuts normalizePhone takes to be fast, its answer (E.164, or the reason) is the library's.
 */
import {
  getCountryCallingCode,
  ParseError,
  parsePhoneNumberWithError,
  validatePhoneNumberLength,
  type CountryCode,
} from 'libphonenumber-js/max';
import { describe, expect, it } from 'vitest';
import {
  isNormalizedPhone,
  type NormalizedPhone,
  normalizePhone,
  parsePhoneRegion,
  type PhoneInvalidReason,
} from '../../src/identity/index.js';
import { seeded } from '../helpers/seeded-random.js';

/**
 * The answer as the library gives it, one plain call after another: the E.164 shape taken as it is; otherwise a
 * strict parse in the region, no extension, isValid(), the length check for why not, and the E.164 shape again.
 */
function oracle(cell: string, region: CountryCode): NormalizedPhone {
  if (isNormalizedPhone(cell)) return { ok: true, e164: cell };
  let parsed: ReturnType<typeof parsePhoneNumberWithError>;
  try {
    parsed = parsePhoneNumberWithError(cell, { defaultCountry: region, extract: false });
  } catch (err) {
    if (!(err instanceof ParseError)) throw err;
    return { ok: false, reason: LIBRARY_REASONS[err.message] ?? 'invalid phone: not a phone number' };
  }
  if (parsed.ext !== undefined)
    return { ok: false, reason: 'invalid phone: has an extension; give the number without it' };
  if (!parsed.isValid()) {
    const length = validatePhoneNumberLength(cell, { defaultCountry: region });
    if (length !== undefined)
      return { ok: false, reason: LIBRARY_REASONS[length] ?? 'invalid phone: not a phone number' };
    return {
      ok: false,
      reason:
        parsed.countryCallingCode === getCountryCallingCode(region)
          ? 'invalid phone: not a valid number for the given region'
          : 'invalid phone: not a valid number for its country calling code',
    };
  }
  if (!isNormalizedPhone(parsed.number))
    return {
      ok: false,
      reason: 'invalid phone: valid, but its E.164 form is not the 10 to 15 digits the service accepts',
    };
  return { ok: true, e164: parsed.number };
}

const LIBRARY_REASONS: Record<string, PhoneInvalidReason> = {
  NOT_A_NUMBER: 'invalid phone: not a phone number',
  INVALID_COUNTRY: 'invalid phone: unknown country calling code',
  TOO_SHORT: 'invalid phone: too short',
  TOO_LONG: 'invalid phone: too long',
  INVALID_LENGTH: 'invalid phone: wrong number of digits for its country',
};

/** Per region: its calling code, trunk prefix, international call prefix, and national numbers to start from. */
const PLANS: Record<string, { cc: string; trunk: string; idd: string; numbers: string[] }> = {
  US: { cc: '1', trunk: '1', idd: '011', numbers: ['6175550102', '2125550147', '2015550123', '8005550100'] },
  GB: { cc: '44', trunk: '0', idd: '00', numbers: ['2079460958', '7400123456', '1614960000', '1134960000'] },
  FR: { cc: '33', trunk: '0', idd: '00', numbers: ['123456789', '612345678', '987654321', '491234567'] },
  DE: { cc: '49', trunk: '0', idd: '00', numbers: ['30123456', '3012345678', '15123456789', '891234567'] },
  IN: { cc: '91', trunk: '0', idd: '00', numbers: ['9876543210', '1123456789', '2223456789', '8012345678'] },
  BR: { cc: '55', trunk: '0', idd: '00', numbers: ['11912345678', '1131234567', '21987654321', '6132345678'] },
  JP: { cc: '81', trunk: '0', idd: '010', numbers: ['312345678', '9012345678', '661234567', '5012345678'] },
};
const REGIONS = Object.keys(PLANS);

function generate(random: () => number): Array<[string, string]> {
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)];
  const digits = (n: number) => Array.from({ length: n }, () => String(int(10))).join('');

  /** A number of the plan: mostly a start number with its last digits changed, sometimes bent out of shape. */
  function number(plan: (typeof PLANS)[string]): string {
    const start = pick(plan.numbers);
    const keep = start.length - 1 - int(4);
    let n = start.slice(0, keep) + digits(start.length - keep);
    const bend = random();
    if (bend < 0.06) n = n.slice(0, -1 - int(3));
    else if (bend < 0.12) n += digits(1 + int(3));
    else if (bend < 0.2) {
      const at = int(n.length);
      n = `${n.slice(0, at)}${int(10)}${n.slice(at + 1)}`;
    } else if (bend < 0.24) n = digits(3 + int(14));
    return n;
  }

  /** The digits cut into groups, as people write them. */
  function grouped(n: string): string {
    const sep = pick([' ', ' ', '-', '.', '/', '', '  ']);
    const parts: string[] = [];
    for (let i = 0; i < n.length; ) {
      const size = 2 + int(3);
      parts.push(n.slice(i, i + size));
      i += size;
    }
    if (parts.length > 1 && random() < 0.25) parts[0] = `(${parts[0]})`;
    return parts.join(sep);
  }

  const writings: Array<(plan: (typeof PLANS)[string], n: string, reader: (typeof PLANS)[string]) => string> = [
    (_, n) => n,
    (_, n) => grouped(n),
    (plan, n) => `${plan.trunk}${n}`,
    (plan, n) => `${plan.trunk} ${grouped(n)}`,
    (plan, n) => `(${plan.trunk}${n.slice(0, 2)}) ${grouped(n.slice(2))}`,
    (plan, n) => `+${plan.cc}${n}`,
    (plan, n) => `+${plan.cc} ${grouped(n)}`,
    (plan, n) => `+${plan.cc}-${grouped(n).replace(/ /g, '-')}`,
    (plan, n) => `+${plan.cc} (${plan.trunk})${grouped(n)}`,
    (plan, n) => `00${plan.cc} ${grouped(n)}`,
    (plan, n) => `00 ${plan.cc} ${grouped(n)}`,
    (plan, n, reader) => `${reader.idd} ${plan.cc} ${grouped(n)}`,
    (plan, n) => `${plan.cc} ${grouped(n)}`,
    (plan, n) => `${plan.cc}${n}`,
    (plan, n) => `  +${plan.cc} ${grouped(n)} `,
    (plan, n) => `+${plan.cc}${n}`.replace(/[0-9]/g, (d) => String.fromCharCode(0xff10 + Number(d))),
  ];
  const junk: Array<(cell: string) => string> = [
    (c) => `${c} ext. ${digits(1 + int(4))}`,
    (c) => `${c} x${digits(2)}`,
    (c) => `${c};`,
    (c) => `tel:${c.replace(/ /g, '')}`,
    (c) => `+${c}`,
    (c) => `call ${c}`,
    (c) => `${c} (home)`,
    (c) => c.replace(/[0-9]/, 'O'),
    (c) => c.replace(/ /g, '\t'),
    (c) => c.replace(/-/g, '–'),
    (c) => `${c}#`,
    (c) => c.slice(0, 1 + int(3)),
    () => pick(['', ' ', '-', '()', '+', '++1', 'n/a', 'NULL', '0', '00', '+0', 'abc', '1-800-FLOWERS']),
    () => digits(20 + int(20)),
  ];

  const cells: Array<[string, string]> = [];
  for (let i = 0; i < 48_000; i++) {
    const home = pick(REGIONS);
    // most cells are read in their own region; some are another country's number
    const reader = random() < 0.8 ? home : pick(REGIONS);
    let cell = pick(writings)(PLANS[home], number(PLANS[home]), PLANS[reader]);
    if (random() < 0.12) cell = pick(junk)(cell);
    cells.push([cell, reader]);
  }
  return cells;
}

describe('normalizePhone gives the answers of libphonenumber-js', () => {
  const cells = generate(seeded(20261124));

  it('for every generated cell: the same E.164 number or the same reason', () => {
    const mismatches: Array<{ cell: string; region: string; got: NormalizedPhone; want: NormalizedPhone }> = [];
    for (const [cell, region] of cells) {
      const want = oracle(cell, region as CountryCode);
      const got = normalizePhone(cell, parsePhoneRegion(region));
      if (JSON.stringify(got) !== JSON.stringify(want)) mismatches.push({ cell, region, got, want });
    }
    expect(mismatches.slice(0, 10)).toEqual([]);
    expect(mismatches.length).toBe(0);
  });

  it('the cells reach every kind of answer, so the comparison covers each path', () => {
    const answers = new Map<string, number>();
    const regionsAccepted = new Set<string>();
    for (const [cell, region] of cells) {
      const want = oracle(cell, region as CountryCode);
      const key = want.ok ? (isNormalizedPhone(cell) ? 'ok as given' : 'ok normalized') : want.reason;
      answers.set(key, (answers.get(key) ?? 0) + 1);
      if (want.ok && !isNormalizedPhone(cell)) regionsAccepted.add(region);
    }
    expect(cells.length).toBeGreaterThanOrEqual(40_000);
    expect(answers.get('ok normalized') ?? 0).toBeGreaterThan(cells.length / 3);
    expect(answers.get('ok as given') ?? 0).toBeGreaterThan(500);
    expect([...regionsAccepted].sort()).toEqual([...REGIONS].sort());
    for (const reason of [
      'invalid phone: not a phone number',
      'invalid phone: too short',
      'invalid phone: too long',
      'invalid phone: not a valid number for the given region',
      'invalid phone: not a valid number for its country calling code',
      'invalid phone: has an extension; give the number without it',
      'invalid phone: unknown country calling code',
      'invalid phone: wrong number of digits for its country',
      'invalid phone: valid, but its E.164 form is not the 10 to 15 digits the service accepts',
    ] satisfies PhoneInvalidReason[]) {
      expect(answers.get(reason) ?? 0, reason).toBeGreaterThan(20);
    }
  });
});
