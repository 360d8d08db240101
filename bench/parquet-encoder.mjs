#!/usr/bin/env node
// The Parquet encoder alone, as its encoding thread runs it: the rows of a real map output (mapped once against
// `serve`, then kept in bench/data) made into row blocks, then encoded block by block: CPU seconds and wall time
// of encoding, of making the blocks, and the file's size. Not a test: the figures depend on the machine. Needs a
// build (npm run build).
//
//   node bench/parquet-encoder.mjs [--rows 1000000] [--runs 3]
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { ParquetEncoder } from '../dist/pipeline/io/parquet/parquet-encoder.js';
import { PARQUET_ROW_GROUP_ROWS } from '../dist/pipeline/io/parquet/parquet-sink.js';
import { utf8RowBlock } from '../dist/pipeline/io/row-blocks.js';
import { openSource } from '../dist/pipeline/io/source.js';
import { BIN, ROOT, childEnv, startServe, stopServe } from './processes.mjs';
import { DATA, numberOption, WORK } from './args.mjs';

const ROWS = numberOption('--rows', 1_000_000);
const RUNS = numberOption('--runs', 3);

/** map's output of the bench's mixed input, made once. */
async function mapOutput() {
  const input = join(DATA, `mixed-${ROWS}.csv`);
  const output = join(DATA, `map-out-${ROWS}.csv`);
  if (existsSync(output)) return output;
  if (!existsSync(input)) {
    const gen = spawn(
      process.execPath,
      [join(ROOT, 'bench', 'gen-input.mjs'), '--rows', String(ROWS), '--seed', '42', '--out', input],
      { stdio: 'inherit' },
    );
    if ((await once(gen, 'close'))[0] !== 0) throw new Error('gen-input failed');
  }
  const serve = await startServe(WORK);
  try {
    const env = childEnv(WORK, { UID2_API_KEY: serve.api_key, UID2_CLIENT_SECRET: serve.client_secret });
    const tmp = join(WORK, 'map-out.tmp.csv');
    const child = spawn(process.execPath, [BIN, 'map', input, '-o', tmp, '--base-url', serve.url, '--quiet'], {
      env,
      stdio: 'inherit',
    });
    const [code] = await once(child, 'close');
    if (code !== 0 && code !== 3) throw new Error(`map exited with ${code}`);
    renameSync(tmp, output);
  } finally {
    await stopServe(serve);
  }
  return output;
}

const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

const source = await openSource({ path: await mapOutput() });
const header = source.header;
// map's result columns are typed as map types them; the input's own columns are text as read
const types = header.map((name) =>
  /_refresh_from$/.test(name) ? 'unix_time' : /_(raw_uid|prev_raw_uid|status|reason)$/.test(name) ? 'string' : 'input',
);
const blocks = [];
let blockCpu = 0;
for await (const chunk of source.rows()) {
  const rows = chunk.map((r) => r.cells);
  const started = cpuSeconds();
  blocks.push(utf8RowBlock(rows, header.length));
  blockCpu += cpuSeconds() - started;
}

const runs = [];
for (let r = 0; r < RUNS; r++) {
  const encoder = new ParquetEncoder({ header, types, rowGroupRows: PARQUET_ROW_GROUP_ROWS });
  const cpu = cpuSeconds();
  const wall = performance.now();
  let bytes = 0;
  for (const block of blocks) bytes += (await encoder.addBlock(block)).length;
  bytes += (await encoder.finish()).length;
  runs.push({ cpu: cpuSeconds() - cpu, wall: (performance.now() - wall) / 1000, bytes });
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `Parquet encoder, ${ROWS.toLocaleString('en-US')} rows of map output (${header.length} columns), ${RUNS} runs:`,
);
console.log(`  making the row blocks  cpu ${blockCpu.toFixed(2)} s`);
console.log(
  `  encoding               cpu ${median(runs.map((x) => x.cpu)).toFixed(2)} s  wall ${median(runs.map((x) => x.wall)).toFixed(2)} s  file ${(runs[0].bytes / 1e6).toFixed(1)} MB  runs ${runs.map((x) => x.cpu.toFixed(2)).join('/')}`,
);
