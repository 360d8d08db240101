#!/usr/bin/env node
// The Parquet encoder alone, as its encoding thread runs it: the rows of a real map output (mapped once against
// `serve`, then kept in bench/data) made into row blocks, then encoded block by block: CPU seconds and wall time
// of encoding, of making the blocks, and the file's size. Not a test: the figures depend on the machine. Needs a
// build (npm run build).
//
//   node bench/parquet-encoder.mjs [--rows 1000000] [--runs 3]
//   node bench/parquet-encoder.mjs --writer hyparquet-writer   the same rows, typed the same, row groups of the same
//   size, encoded by hyparquet-writer (each text cell a view of its bytes in the block), interleaved with the
//   encoder's runs: the writer of the reader's family, measured against the one the encoder uses
//   node bench/parquet-encoder.mjs --before DIR   also encodes with the encoder of another build (DIR holds its
//   dist/, e.g. a copy made before a change), interleaved with this one's runs, for a before/after
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, renameSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import { ParquetEncoder } from '../dist/pipeline/io/parquet/parquet-encoder.js';
import { PARQUET_ROW_GROUP_ROWS } from '../dist/pipeline/io/parquet/parquet-sink.js';
import { utf8RowBlock, viewOfBlock } from '../dist/pipeline/io/row-blocks.js';
import { openSource } from '../dist/pipeline/io/source.js';
import { settleInput } from '../dist/pipeline/jobs/run-input.js';
import { BIN, ROOT, childEnv, startServe, stopServe } from './processes.mjs';
import { DATA, numberOption, WORK } from './args.mjs';

const ROWS = numberOption('--rows', 1_000_000);
const RUNS = numberOption('--runs', 3);
const argv = process.argv.slice(2);
const OTHER = argv.includes('--writer') ? argv[argv.indexOf('--writer') + 1] : undefined;
if (OTHER !== undefined && OTHER !== 'hyparquet-writer') throw new Error(`no such writer: ${OTHER}`);
const BEFORE = argv.includes('--before') ? argv[argv.indexOf('--before') + 1] : undefined;
const BeforeEncoder =
  BEFORE === undefined
    ? undefined
    : (await import(pathToFileURL(join(resolve(BEFORE), 'dist/pipeline/io/parquet/parquet-encoder.js')).href))
        .ParquetEncoder;

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

const mapped = await mapOutput();
const settled = await settleInput([mapped], {});
const source = await openSource({ path: mapped, format: settled.format, ...settled.reading });
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

/** The blocks encoded by hyparquet-writer, a row group at a time: the file's size in bytes. */
function hyparquetWriter() {
  const bytes = new ByteWriter();
  let size = 0;
  // the bytes of each row group are counted and let go, as the encoder hands them out
  bytes.flush = function flush() {
    size += this.index;
    this.index = 0;
  };
  const schema = [
    { name: 'root', num_children: header.length },
    ...header.map((name, c) =>
      types[c] === 'unix_time'
        ? { name, type: 'INT64', repetition_type: 'OPTIONAL' }
        : { name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
    ),
  ];
  const writer = new ParquetWriter({ writer: bytes, schema, codec: 'SNAPPY', createdBy: 'uid2-batch' });
  let columns = header.map(() => []);
  const writeGroup = () => {
    const columnData = header.map((name, c) => ({ name, data: columns[c], statistics: types[c] === 'unix_time' }));
    writer.write({ columnData, rowGroupSize: columns[0].length });
    columns = header.map(() => []);
  };
  for (const block of blocks) {
    const { rows, lengths, bytes: cells } = viewOfBlock(block);
    let at = 0;
    for (let c = 0; c < header.length; c++) {
      const column = columns[c];
      for (let r = 0; r < rows; r++) {
        const length = lengths[c * rows + r];
        const cell = cells.subarray(at, at + length);
        at += length;
        if (types[c] === 'input') column.push(cell);
        else if (length === 0) column.push(null);
        else column.push(types[c] === 'unix_time' ? BigInt(Buffer.from(cell).toString('latin1')) : cell);
      }
    }
    if (columns[0].length >= PARQUET_ROW_GROUP_ROWS) writeGroup();
  }
  if (columns[0].length > 0) writeGroup();
  writer.finish();
  bytes.flush();
  return size;
}

/** The blocks encoded by an encoder of this build or another: CPU seconds, wall seconds, the file's size. */
async function encodeWith(Encoder) {
  const encoder = new Encoder({ header, types, rowGroupRows: PARQUET_ROW_GROUP_ROWS });
  const cpu = cpuSeconds();
  const wall = performance.now();
  let bytes = 0;
  for (const block of blocks) bytes += (await encoder.addBlock(block)).length;
  bytes += (await encoder.finish()).length;
  return { cpu: cpuSeconds() - cpu, wall: (performance.now() - wall) / 1000, bytes };
}

const runs = [];
const befores = [];
const others = [];
for (let r = 0; r < RUNS; r++) {
  runs.push(await encodeWith(ParquetEncoder));
  if (BeforeEncoder !== undefined) befores.push(await encodeWith(BeforeEncoder));
  if (OTHER === undefined) continue;
  const otherCpu = cpuSeconds();
  const otherWall = performance.now();
  const otherBytes = hyparquetWriter();
  others.push({ cpu: cpuSeconds() - otherCpu, wall: (performance.now() - otherWall) / 1000, bytes: otherBytes });
}
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `Parquet encoder, ${ROWS.toLocaleString('en-US')} rows of map output (${header.length} columns), ${RUNS} runs:`,
);
console.log(`  making the row blocks  cpu ${blockCpu.toFixed(2)} s`);
for (const [name, figures] of [
  ['encoding', runs],
  ['encoding (before)', befores],
  [OTHER, others],
]) {
  if (figures.length === 0) continue;
  const wall = median(figures.map((x) => x.wall));
  console.log(
    `  ${name.padEnd(22)} cpu ${median(figures.map((x) => x.cpu)).toFixed(2)} s  wall ${wall.toFixed(2)} s  ${Math.round(ROWS / wall).toLocaleString('en-US')} rows/s  file ${(figures[0].bytes / 1e6).toFixed(1)} MB  runs ${figures.map((x) => x.cpu.toFixed(2)).join('/')}`,
  );
}
