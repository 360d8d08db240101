/** A map run's own steps settled once out of what was asked: the columns asked for, the requests, the ending. */
import { MAX_ITEMS_PER_REQUEST } from '../../protocol/wire.js';
import { formatOfExtension } from '../io/format-names.js';
import type { ColumnFlags } from '../map/identifier-columns.js';
import type { LayoutRequest } from '../map/result-layout.js';
import type { OutputFlags } from '../run/output-options.js';
import type { ColumnsRequest } from './map-columns.js';

/** What the steps of a map run are asked, as the options carry it (map-files-job.ts's MapOptions). */
export interface EngineAsked extends Omit<ColumnsRequest, 'layout'> {
  api?: 'v3' | 'v2' | undefined;
  dryRun?: boolean | undefined;
  batchSize?: number | undefined;
  failFast?: boolean | undefined;
  concurrency?: number | undefined;
  rejects?: string | undefined;
  layout?: Omit<LayoutRequest, 'timeFormat'> | undefined;
  output: OutputFlags;
}

/** The steps' settings, every default filled in: the column choice, the engine, the run record and the ending read it. */
export interface EngineSpec {
  readonly api: 'v3' | 'v2';
  readonly dryRun: boolean;
  /** Identifiers per request: --batch-size, else the most the service takes. */
  readonly batchSize: number;
  /** --fail-fast: the first failed request ends the run. */
  readonly failFast: boolean;
  /** --concurrency as asked: chosen against the service once the target is known. */
  readonly concurrency: number | undefined;
  /** The identifier columns, phone regions, null markers and layout (with the output's time and hash formats). */
  readonly columns: ColumnsRequest;
  /** What is said when --rejects names a format other than the output's (the rejects share the output's format). */
  readonly rejectsNote: string | undefined;
  /** The output flags, for the run record and the run's reporting. */
  readonly output: OutputFlags;
}

const COLUMN_FLAGS = ['emailCol', 'phoneCol', 'emailHashCol', 'phoneHashCol', 'col', 'type'] as const;

/** Settles the steps' settings once, before the input is opened. */
export function settleEngine(asked: EngineAsked): EngineSpec {
  const columnFlags: ColumnFlags = {};
  for (const key of COLUMN_FLAGS) if (asked[key] !== undefined) Object.assign(columnFlags, { [key]: asked[key] });
  const { output } = asked;
  const rejectsFormat = asked.rejects === undefined ? undefined : formatOfExtension(asked.rejects);
  return {
    api: asked.api ?? 'v3',
    dryRun: asked.dryRun === true,
    batchSize: asked.batchSize ?? MAX_ITEMS_PER_REQUEST,
    failFast: asked.failFast === true,
    concurrency: asked.concurrency,
    columns: {
      ...columnFlags,
      phoneRegion: asked.phoneRegion,
      profilePhoneRegion: asked.profilePhoneRegion,
      phoneRegionColumn: asked.phoneRegionColumn,
      nullValues: asked.nullValues,
      layout: { ...asked.layout, timeFormat: output.timeFormat, hashEncoding: output.hashEncoding },
    },
    rejectsNote:
      rejectsFormat !== undefined && rejectsFormat !== output.format
        ? `--rejects ${asked.rejects} is written as ${output.format.toUpperCase()}, the format of the output`
        : undefined,
    output,
  };
}
