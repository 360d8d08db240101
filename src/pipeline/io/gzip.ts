/** Gzip-compressed input: the decompressed reads, and what a failing gunzip means for the user. */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { InputError } from './table.js';

/** What a failing gunzip means for the user: the file was cut short, or is not (or no longer) gzip. */
export function gzipFailure(name: string, err: unknown): InputError {
  // a failure of the bytes under the gzip (a download broken off) is already said for what it is
  if (err instanceof InputError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'Z_BUF_ERROR') {
    return new InputError(
      name,
      undefined,
      'the gzip data ends early (a truncated file?)',
      'copy or download it again, completely',
    );
  }
  return new InputError(
    name,
    undefined,
    `corrupt gzip data (${code ?? 'unreadable'})`,
    'copy or download it again, or check how it was compressed',
  );
}

/**
 * The decompressed reads of a gzip input whose first read was `head` and whose further reads come from `raw`.
 * The gunzip holds at most its own buffers, so memory stays bounded whatever the file's size; concatenated gzip
 * members are read on. `count` is told the size of each compressed read, for progress.
 */
export function gunzipReads(
  head: Buffer,
  raw: AsyncIterator<Buffer | string>,
  count: (bytes: number) => void,
  chunkBytes: number,
): AsyncIterator<Buffer> {
  async function* compressed(): AsyncGenerator<Buffer> {
    yield head;
    for (;;) {
      const r = await raw.next();
      if (r.done) return;
      const buf = asBuffer(r.value);
      count(buf.length);
      yield buf;
    }
  }
  const gunzip = createGunzip({ chunkSize: chunkBytes });
  // the error reaches the reader through the gunzip's own iterator; this promise only must not go unhandled
  pipeline(Readable.from(compressed(), { objectMode: false }), gunzip).catch(() => undefined);
  return gunzip[Symbol.asyncIterator]();
}

export function asBuffer(chunk: Buffer | string): Buffer {
  return typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : chunk;
}
