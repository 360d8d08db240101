// npm run docs:api: the API reference builds from the doc comments, and a broken one fails the build.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/map-e2e-build.js';
import { tempDir } from '../helpers/map-e2e-data.js';

const SCRIPT = join(ROOT, 'scripts', 'api-docs.mjs');
const TOOL = join(ROOT, 'scripts', 'api-docs');
const dir = tempDir('api-docs');

afterAll(() => dir.remove());

function docsApi(args: string[] = []): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [SCRIPT, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 170_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('npm run docs:api', () => {
  it('builds the reference of the library with no warning', () => {
    const run = docsApi();
    expect(run.output).not.toMatch(/\[warning\]|\[error\]/);
    expect(run.status).toBe(0);
    const classPage = join(ROOT, 'docs', 'api', 'classes', 'IdentityClient.html');
    expect(existsSync(classPage)).toBe(true);
    expect(readFileSync(classPage, 'utf8')).toContain('mapIdentities');
  }, 180_000);

  it('fails, with the same settings, on a doc comment whose link leads nowhere', () => {
    // the project's TypeDoc settings over one file with a broken link (TypeDoc was installed by the test above)
    const settings = JSON.parse(readFileSync(join(TOOL, 'typedoc.json'), 'utf8')) as Record<string, unknown>;
    dir.file('broken.ts', '/** Like {@link NoSuchThing}. */\nexport const answer = 42;\n');
    dir.file(
      'tsconfig.json',
      JSON.stringify({ compilerOptions: { module: 'NodeNext', strict: true }, files: ['broken.ts'] }),
    );
    const options = dir.file(
      'typedoc.json',
      JSON.stringify({
        ...settings,
        $schema: undefined,
        entryPoints: ['broken.ts'],
        tsconfig: 'tsconfig.json',
        out: 'out',
      }),
    );
    const run = spawnSync(
      process.execPath,
      [join(TOOL, 'node_modules', 'typedoc', 'bin', 'typedoc'), '--options', options],
      {
        cwd: dir.path,
        encoding: 'utf8',
        timeout: 170_000,
      },
    );
    expect(`${run.stdout}${run.stderr}`).toMatch(/Failed to resolve link to "NoSuchThing"/);
    expect(run.status).not.toBe(0);
  }, 180_000);
});
