/** A reader's options as a run settles them, from what a test asks (absent: the defaults, the format by name). */
import type { InputPart, PartOptions } from '../../src/pipeline/io/parts-source.js';
import type { OpenSourceOptions, PartReading } from '../../src/pipeline/io/table.js';
import { readingOf, type InputReading } from '../../src/pipeline/jobs/run-input.js';

/** What a test asks of a reader: the path and the rest as OpenSourceOptions has them, the reading as the flags say it. */
export type AskedSource = InputReading & Omit<OpenSourceOptions, keyof PartReading>;

/** The options a reader is opened with, settled as a run settles its input. */
export function settled(asked: AskedSource): OpenSourceOptions {
  const { format, delimiter, header, encoding, chunkRows, ...rest } = asked;
  return { ...rest, ...readingOf(asked.path, { format, delimiter, header, encoding, chunkRows }) };
}

/** The parts and options openParts is given for these paths, settled as a run settles its input. */
export function settledParts(
  paths: readonly string[],
  asked: InputReading & Omit<PartOptions, keyof PartReading> = {},
): [InputPart[], PartOptions] {
  const { format, delimiter, header, encoding, chunkRows, ...rest } = asked;
  const reading: InputReading = { format, delimiter, header, encoding, chunkRows };
  const parts = paths.map((path) => ({ path, format: readingOf(path, reading).format }));
  const { format: _first, ...common } = readingOf(paths[0] ?? '-', reading);
  return [parts, { ...rest, ...common }];
}
