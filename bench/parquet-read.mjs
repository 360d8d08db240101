#!/usr/bin/env node
// The Parquet reader alone, in a process of its own per run: a file of 1M rows and 3 text columns written by
// DuckDB in each codec warehouses use (one 1M-row group, as pyarrow writes, and DuckDB's own groups), and a wide
// file: rows/s, CPU and peak RSS of reading every row. Not a test: the figures depend on the machine. Needs a build
// (npm run build).
//
//   node bench/parquet-read.mjs [--rows 1000000] [--runs 3] [--before DIR]   DIR holds the dist/ of another build,
//   read interleaved with this one, for a before/after
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { ROOT } from './processes.mjs';
import { DATA, numberOption } from './args.mjs';

const ROWS = numberOption('--rows', 1_000_000);
const RUNS = numberOption('--runs', 3);
const argv = process.argv.slice(2);
const BEFORE = argv.includes('--before') ? argv[argv.indexOf('--before') + 1] : undefined;
const WIDE_COLUMNS = 2_000;
const WIDE_ROWS = 5_000;

async function duck(sql) {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  try {
    await conn.run(sql);
  } finally {
    conn.closeSync();
    db.closeSync();
  }
}

/** The inputs, written once into bench/data. */
async function inputs() {
  const table = `SELECT 'user' || i || '@example.com' AS email, '+1617555' || lpad((i % 10000)::VARCHAR, 4, '0') AS phone,
                        'C' || lpad(i::VARCHAR, 8, '0') AS id FROM range(${ROWS}) t(i)`;
  const files = [];
  for (const codec of ['snappy', 'zstd', 'gzip'])
    for (const [groups, rowGroupSize] of [
      ['one group', ROWS],
      ['DuckDB groups', 122_880],
    ]) {
      const path = join(DATA, `read-${ROWS}-${codec}-${rowGroupSize}.parquet`);
      if (!existsSync(path)) {
        await duck(
          `COPY (${table}) TO '${path}.tmp' (FORMAT parquet, COMPRESSION ${codec}, ROW_GROUP_SIZE ${rowGroupSize})`,
        );
        renameSync(`${path}.tmp`, path);
      }
      files.push({ name: `3 text columns, ${codec}, ${groups}`, path, rows: ROWS });
    }
  const wide = join(DATA, `read-wide-${WIDE_COLUMNS}x${WIDE_ROWS}.parquet`);
  if (!existsSync(wide)) {
    const columns = Array.from({ length: WIDE_COLUMNS }, (_, c) => `'v${c}_' || i AS c${c}`).join(', ');
    await duck(`COPY (SELECT ${columns} FROM range(${WIDE_ROWS}) t(i)) TO '${wide}.tmp' (FORMAT parquet)`);
    renameSync(`${wide}.tmp`, wide);
  }
  files.push({ name: `${WIDE_COLUMNS.toLocaleString('en-US')} text columns`, path: wide, rows: WIDE_ROWS });
  return files;
}

/** Reads every row of `path` with the reader of the build in `dist`; its figures, reported by the child itself. */
async function read(dist, path) {
  const source = `
    import { readFileSync } from 'node:fs';
    const { openParquetSource } = await import(${JSON.stringify(join(dist, 'pipeline/io/parquet/parquet-source.js'))});
    const started = performance.now();
    let rows = 0;
    for await (const chunk of (await openParquetSource({ path: ${JSON.stringify(path)}, chunkRows: 2000 })).rows()) rows += chunk.length;
    const u = process.resourceUsage();
    const hwm = /VmHWM:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'));
    console.log(JSON.stringify({ rows, seconds: (performance.now() - started) / 1000, cpuS: (u.userCPUTime + u.systemCPUTime) / 1e6, peakMb: Number(hwm[1]) / 1024 }));`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', source], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const [code] = await once(child, 'close');
  if (code !== 0) throw new Error(`the reader exited with ${code}`);
  return JSON.parse(out);
}

const files = await inputs();
const builds = [['', join(ROOT, 'dist')], ...(BEFORE === undefined ? [] : [[' (before)', join(BEFORE, 'dist')]])];
const cases = files.flatMap((file) => builds.map(([label, dist]) => ({ ...file, label, dist })));
const results = cases.map(() => []);
for (let r = 0; r < RUNS; r++)
  for (let k = 0; k < cases.length; k++) {
    const figures = await read(cases[k].dist, cases[k].path);
    if (figures.rows !== cases[k].rows) throw new Error(`${cases[k].name}: ${figures.rows} rows read`);
    results[k].push(figures);
  }
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`Parquet read, every row as text, median of ${RUNS} interleaved runs`);
cases.forEach(({ name, label, rows }, k) => {
  const s = median(results[k].map((x) => x.seconds));
  console.log(
    `  ${`${name}${label}`.padEnd(44)} ${s.toFixed(2).padStart(6)} s  ${Math.round(rows / s)
      .toLocaleString('en-US')
      .padStart(
        9,
      )} rows/s  cpu ${median(results[k].map((x) => x.cpuS)).toFixed(2)} s  peak ${Math.max(...results[k].map((x) => x.peakMb)).toFixed(0)} MB`,
  );
});
