import { describe, expect, it } from 'vitest';
import { parsePhoneRegion } from '../../src/identity/index.js';
import { chooseMapColumns } from '../../src/pipeline/jobs/map-columns.js';
import { InputError } from '../../src/pipeline/io/table.js';
import { UserError } from '../../src/pipeline/run/exit-codes.js';
import type { TableInput } from '../../src/pipeline/threads/table-input.js';

// map's columns are chosen in one step from what the run asks and the input's header; called here with a
// header alone (no file), as the job calls it once its input is open.

function input(header: string[], extra: object = {}): TableInput {
  return { name: 'in.csv', header, ...extra } as unknown as TableInput;
}

describe('chooseMapColumns', () => {
  it('picks the identifier columns by name, says so, and lays out the output', () => {
    const said: string[] = [];
    const { columns, layout } = chooseMapColumns({ layout: { keep: ['id'] } }, input(['id', 'email']), (line) =>
      said.push(line),
    );
    expect(columns.map((c) => [c.name, c.kind])).toEqual([['email', 'email']]);
    expect(said.join('\n')).toContain('email');
    expect(layout).toMatchObject({ keep: [0], prefixes: [''], emitHash: false });
  });

  it('adds the phone region and the null markers to the columns that may hold phones', () => {
    const { columns } = chooseMapColumns(
      { phoneCol: 'tel', phoneRegion: parsePhoneRegion('GB'), nullValues: ['NULL'], layout: {} },
      input(['tel']),
      () => undefined,
    );
    expect(columns[0]).toMatchObject({ name: 'tel', kind: 'phone', phoneRegion: 'GB' });
    expect(JSON.stringify(columns[0])).toContain('NULL');
  });

  it('a column asked for that the input lacks is one usage error, from the columns or from the layout', () => {
    const ask = (request: Parameters<typeof chooseMapColumns>[0]) => () =>
      chooseMapColumns(request, input(['id', 'email']), () => undefined);
    for (const request of [{ emailCol: 'mail', layout: {} }, { layout: { keep: ['customer'] } }]) {
      expect(ask(request)).toThrow(UserError);
      try {
        ask(request)();
      } catch (err) {
        expect((err as UserError).exitCode).toBe(2);
      }
    }
  });

  it('a Parquet identifier column that is not text is an input error, not a usage error', () => {
    const parquet = input(['email'], { columns: [{ name: 'email', kind: 'scalar', declared: 'INT64' }] });
    expect(() => chooseMapColumns({ layout: {} }, parquet, () => undefined)).toThrow(InputError);
  });
});
