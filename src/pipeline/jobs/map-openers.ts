/** What a map run opens, each from its own settled spec: the input, the outputs, the bad-rows list, the state. */
import { BadRowsOutput, type BadRowFlags } from '../run/bad-rows-output.js';
import type { Say } from '../run/run-deps.js';
import type { TableInput } from '../threads/table-input.js';
import { openOutputs, writeEmptyOutput, type OpenOutputs, type OutputOpening, type OutputSpec } from './map-outputs.js';
import { openMapState, type MapStateFile, type StateSpec } from './map-state.js';
import { openInput, type InputOpening, type InputSpec } from './run-input.js';

/**
 * The openers a map run is given. The job settles each spec once, from its options; only an opener touches files,
 * threads, S3 or a database, and it is handed its own spec, never the options. Tests give stand-ins to see each
 * spec as it is handed on.
 */
export interface MapOpeners {
  /** The settled input, read as the run's plan of threads has it. */
  input(spec: InputSpec, how: InputOpening): Promise<TableInput>;
  /** The output (or the parts of --output-dir) and --rejects. */
  outputs(spec: OutputSpec, at: OutputOpening): Promise<OpenOutputs>;
  /** The output of an input with no columns: empty too, written whole. */
  emptyOutput(spec: OutputSpec, stdout: NodeJS.WritableStream): Promise<void>;
  /** The list of records that could not be read; undefined when they are not skipped. */
  badRows(spec: BadRowFlags, say: Say): Promise<BadRowsOutput | undefined>;
  state(spec: StateSpec): MapStateFile | Promise<MapStateFile>;
}

/** The openers of a run of the program. */
export const MAP_OPENERS: MapOpeners = {
  input: openInput,
  outputs: openOutputs,
  emptyOutput: writeEmptyOutput,
  badRows: (spec, say) => BadRowsOutput.open(spec, say),
  state: openMapState,
};
