// `uid2-batch state info|export|copy|checkpoint|vacuum`: look into, copy and look after a state.
import type { Command } from 'commander';
import { parseInstantMs } from '../../protocol/index.js';
import { EXIT, UserError } from '../shared/exit-codes.js';
import { hashEncodingOption, lockWaitOption, outputFlags } from '../shared/options.js';
import { refuseOverlappingPaths, standardOutputs } from '../shared/output-paths.js';
import { formatCount, writeSummaryJson } from '../../pipeline/run/summary.js';
import { quoted } from '../shared/user-values.js';
import { copyState, type StateCopyResult } from '../../pipeline/jobs/state-copy.js';
import { exportState } from '../../pipeline/jobs/state-export.js';
import { readStateInfoOf } from '../../pipeline/jobs/state-info.js';
import { checkpointState, type MaintenanceResult, vacuumState } from '../../pipeline/jobs/state-maintenance.js';
import { formatBytes, formatStateInfo } from './state-info-text.js';

function parseNow(text: string | undefined): number {
  if (text === undefined) return Math.floor(Date.now() / 1000);
  const ms = parseInstantMs(text);
  if (ms === null || ms < 0)
    throw new UserError(`--now must be an ISO 8601 date-time (no zone means UTC) or Unix seconds (got '${text}')`);
  return Math.floor(ms / 1000);
}

function sizes(what: string, r: MaintenanceResult): string {
  return `${what}: file ${formatBytes(r.before.file)} -> ${formatBytes(r.after.file)}, WAL ${formatBytes(r.before.wal)} -> ${formatBytes(r.after.wal)}`;
}

export function registerStateCommand(program: Command): void {
  const state = program
    .command('state')
    .summary('look into a state (info, export), copy it (copy) and look after a state file (checkpoint, vacuum)')
    .description(
      'Works on a state made by map --state, of any environment: a file, or for info, export and copy a postgres:// URL. ' +
        "info and export only read it; copy writes its destination, under both states' locks; checkpoint and " +
        'vacuum write it, under the same lock as a map or remap-due run (--wait SECONDS waits for a run that holds it). ' +
        'Nothing here contacts the service.',
    );

  state
    .command('info')
    .description('entries by status and by due date, schema, environment, size, pending changes and the last run')
    .argument('<file>', 'the state file, or a postgres:// URL')
    .option(
      '--now <time>',
      'count what is due at this time instead of now: ISO 8601 (no zone means UTC) or Unix seconds',
    )
    .option('--json', 'print the same as one JSON object')
    .action(async (file: string, opts: Record<string, unknown>) => {
      const info = await readStateInfoOf(file, parseNow(typeof opts.now === 'string' ? opts.now : undefined));
      process.stdout.write(opts.json === true ? `${JSON.stringify(info, null, 2)}\n` : formatStateInfo(info));
    });

  state
    .command('export')
    .description(
      'every entry as hash_type, hash, status, raw_uid, prev_raw_uid, refresh_from: hashes and raw UIDs, never an email or phone',
    )
    .argument('<file>', 'the state file, or a postgres:// URL')
    .option(
      '-o, --output <file>',
      'write rows to this file (written to a temp file, renamed at the end); default stdout',
    )
    .option('--format <format>', 'csv (default) or jsonl')
    .addOption(hashEncodingOption('hashes'))
    .option('--summary-json <file>', 'also write the number of entries exported as JSON to this file')
    .option('-q, --quiet', 'no summary line on stderr')
    .action(async (file: string, opts: Record<string, unknown>) => {
      const format = opts.format ?? 'csv';
      if (format !== 'csv' && format !== 'jsonl')
        throw new UserError(`--format must be csv or jsonl (got '${String(format)}')`);
      const output = { ...outputFlags(opts), format: format as 'csv' | 'jsonl' };
      refuseOverlappingPaths([{ flag: 'the state file', path: file }], standardOutputs(output));
      const startedMs = Date.now();
      const { exported: n, damaged } = await exportState(file, output, process.stdout);
      if (!output.quiet)
        process.stderr.write(`state export: ${formatCount(n)} entries written to ${output.output ?? 'stdout'}\n`);
      if (output.summaryJson !== undefined) {
        await writeSummaryJson(output.summaryJson, {
          command: 'state export',
          entries: n,
          ...(damaged > 0 ? { damaged_entries: damaged } : {}),
          duration_s: (Date.now() - startedMs) / 1000,
        });
      }
      // what was readable is written; the entries that were not are said, and the run is not a success
      if (damaged > 0) {
        throw new UserError(
          `state file ${quoted(file)} is damaged: ${formatCount(damaged)} entries fail their checksum and were left out of the export; restore the file from a backup to get them back`,
          EXIT.failed,
        );
      }
      process.exitCode = EXIT.ok;
    });

  state
    .command('copy')
    .description(
      'copy every entry, the environment, API and creation time, and the pending changes of one state into another: ' +
        'a file or a postgres:// URL, either way. Resumable: run it again after a stop and it goes on from its last page; ' +
        'a finished copy run again does nothing. The destination must be new, or empty, or a copy of the same source',
    )
    .argument('<src>', 'the state to copy: a state file, or a postgres:// URL')
    .argument('<dst>', 'where to copy it: a new state file, or a postgres:// URL of an empty schema')
    .option('--json', 'print the summary as one JSON object on stdout instead of a line on stderr')
    .action(async (src: string, dst: string, opts: Record<string, unknown>) => {
      const tty = process.stderr.isTTY === true && opts.json !== true;
      let total: number | undefined;
      const result = await copyState(src, dst, {
        ...(tty
          ? {
              onTotal: (n: number) => {
                total = n;
              },
              onPage: (n: number) => {
                process.stderr.write(
                  `\rstate copy: ${formatCount(n)}${total === undefined ? '' : ` of ${formatCount(total)}`} entries`,
                );
              },
            }
          : {}),
      });
      if (tty && result.entries > 0) process.stderr.write('\n');
      if (opts.json === true) process.stdout.write(`${JSON.stringify(result)}\n`);
      else process.stderr.write(`${copyLine(result)}\n`);
      process.exitCode = EXIT.ok;
    });

  // two upkeep commands of one shape: a file, how long to wait for a run that holds it, the sizes after
  const upkeep = [
    {
      name: 'checkpoint',
      description:
        'write the WAL (the -wal file beside it) into the state file and empty it, so that copying the file alone is a complete backup',
      run: checkpointState,
    },
    {
      name: 'vacuum',
      description:
        'rebuild the state file without its free space (after many opt-outs or a migration), then checkpoint it',
      run: vacuumState,
    },
  ];
  for (const { name, description, run } of upkeep) {
    state
      .command(name)
      .description(description)
      .argument('<file>', 'the state file')
      .addOption(lockWaitOption())
      .action(async (file: string, opts: Record<string, unknown>) => {
        const result = await run(file, typeof opts.wait === 'number' ? opts.wait : 0);
        process.stderr.write(`${sizes(`state ${name} ${file}`, result)}\n`);
      });
  }
}

/** The one line `state copy` ends with. */
function copyLine(r: StateCopyResult): string {
  if (r.complete) return `state copy: ${r.destination} is already a complete copy of ${r.source}; nothing to do`;
  return (
    `state copy: ${formatCount(r.entries)} entries and ${formatCount(r.changes)} pending changes copied from ${r.source} to ${r.destination}` +
    (r.resumed ? ' (went on from where an earlier copy stopped)' : '')
  );
}
