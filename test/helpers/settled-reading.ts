/** A reader's options as a run settles them (settleInput), from what a test asks: absent, the defaults. */
import type { InputPart, PartOptions } from '../../src/pipeline/io/parts-source.js';
import type { OpenSourceOptions, PartReading } from '../../src/pipeline/io/table.js';
import { settleInput, type InputReading } from '../../src/pipeline/jobs/run-input.js';

/** What a test asks of a reader: the path and the rest as OpenSourceOptions has them, the reading as the flags say it. */
export type AskedSource = InputReading & Omit<OpenSourceOptions, keyof PartReading>;

/** The options a reader is opened with, settled as a run settles its input. */
export async function settled(asked: AskedSource): Promise<OpenSourceOptions> {
  const { format, delimiter, header, encoding, chunkRows, ...rest } = asked;
  const spec = await settleInput([asked.path], { format, delimiter, header, encoding, chunkRows });
  return { ...rest, format: spec.format, ...spec.reading };
}

/** The parts and options openParts is given for these paths, settled as a run settles its input. */
export async function settledParts(
  paths: readonly string[],
  asked: InputReading & Omit<PartOptions, keyof PartReading> = {},
): Promise<[InputPart[], PartOptions]> {
  const { format, delimiter, header, encoding, chunkRows, ...rest } = asked;
  const spec = await settleInput(paths, { format, delimiter, header, encoding, chunkRows });
  return [[...spec.parts], { ...rest, ...spec.reading }];
}
