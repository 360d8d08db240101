// Builds the library's API reference into docs/api/ (git-ignored) with TypeDoc, warnings counted as errors, so a
// doc comment with a broken link or a public type that cannot be reached fails the build.
//
//   npm run docs:api [-- extra TypeDoc options]
//
// TypeDoc reads the sources through the TypeScript 6 API, and this project compiles with TypeScript 7, which has
// none: so TypeDoc and its TypeScript live in their own small package, scripts/api-docs/, installed from its lock
// file on first use (`npm ci`, the npm registry only). Exit status: TypeDoc's.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const tool = join(dirname(fileURLToPath(import.meta.url)), 'api-docs');
const typedoc = join(tool, 'node_modules', 'typedoc', 'bin', 'typedoc');

if (!existsSync(typedoc)) {
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  const install = spawnSync(npm, ['ci', '--no-audit', '--no-fund', '--silent'], { cwd: tool, stdio: 'inherit' });
  if (install.status !== 0) {
    console.error('docs:api: installing TypeDoc in scripts/api-docs failed (npm ci)');
    process.exit(1);
  }
}

const run = spawnSync(process.execPath, [typedoc, '--options', join(tool, 'typedoc.json'), ...process.argv.slice(2)], {
  stdio: 'inherit',
});
process.exit(run.status ?? 1);
