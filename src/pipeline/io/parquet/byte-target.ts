/** Where a Parquet file's bytes go, in file order: a local temp file renamed into place, or an upload. */
import { unlink, type FileHandle } from 'node:fs/promises';
import { fileFailure, finalModeFor, openOutputTemp, preparedFile } from '../output/output-file.js';
import type { OutputError, PreparedOutput } from '../table.js';

/**
 * Takes a file's bytes in order, once each. A Parquet file is never read back while it is written (its index
 * comes last), so a target that cannot seek, as an object being uploaded, serves as well as a file.
 */
export interface ByteTarget {
  /** The output as messages name it: the path given, or the s3:// URL. */
  readonly name: string;
  /** Resolves once the bytes are taken (they are the target's until then) and it has room for more. */
  write(bytes: Uint8Array): Promise<void>;
  /** After the last write: the bytes made durable, ready to appear by publish(); on failure, nothing is left. */
  prepare(): Promise<PreparedOutput>;
  /** Drops what was written: nothing appears. Safe after a failure. */
  discard(): Promise<void>;
  /** A failure of this target (not already an OutputError) as one line naming the output. */
  failure(err: Error): OutputError;
}

/**
 * The output file at `path`: written to its private temp file beside the target, then synced, given its final
 * mode and renamed into place by publish(), as every file output is (see output-file.ts).
 */
export async function openFileTarget(path: string, mode: number): Promise<ByteTarget> {
  const { target, tmp, handle } = await openOutputTemp(path);
  return new FileTarget(target, tmp, handle, mode);
}

class FileTarget implements ByteTarget {
  constructor(
    readonly name: string,
    private readonly tmp: string,
    private readonly handle: FileHandle,
    private readonly mode: number,
  ) {}

  async write(bytes: Uint8Array): Promise<void> {
    let done = 0;
    while (done < bytes.length) {
      const { bytesWritten } = await this.handle.write(bytes, done, bytes.length - done);
      done += bytesWritten;
    }
  }

  async prepare(): Promise<PreparedOutput> {
    try {
      await this.handle.sync();
      await this.handle.chmod(finalModeFor(this.name, this.mode));
      await this.handle.close();
    } catch (err) {
      await this.discard();
      throw err;
    }
    return preparedFile(this.name, this.tmp, this.name);
  }

  async discard(): Promise<void> {
    await this.handle.close().catch(() => undefined);
    await unlink(this.tmp).catch(() => undefined);
  }

  failure(err: Error): OutputError {
    return fileFailure(this.name, err);
  }
}
