#!/usr/bin/env node
// npm's prepare step: builds dist/ in a checkout, and says so instead of failing when TypeScript is absent.
//
// npm runs prepare on `npm install` in a checkout and on `npm pack`/`npm publish` (after prepack, which empties
// dist/). An install that omits the dev dependencies (`--omit=dev`, NODE_ENV=production) has no TypeScript: the
// install itself is fine, so it only warns. Packing without TypeScript would ship no CLI, so that fails. An
// installed tarball never runs prepare: it ships dist/ built.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const packing = process.env.npm_command === 'pack' || process.env.npm_command === 'publish';

let tsc;
try {
  const manifest = require.resolve('typescript/package.json');
  tsc = join(dirname(manifest), require(manifest).bin.tsc);
} catch {
  process.stderr.write(
    'uid2-batch: TypeScript is not installed (dev dependencies omitted), so dist/ was not built; `npm install` with the dev dependencies builds it\n',
  );
  process.exit(packing ? 1 : 0);
}

const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { stdio: 'inherit' });
process.exit(run.status ?? 1);
