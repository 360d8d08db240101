/** The key blocks a level reader keeps in memory: their bytes packed in shared chunks, their headers by block index. */
import { BLOCK_HEADER, type BlockHeader } from './key-blocks.js';

// doubled for each next chunk: a small level takes little memory
const FIRST_CHUNK_BYTES = 1 << 16;
const MAX_CHUNK_BYTES = 1 << 20;

/**
 * Blocks by their index among a level's blocks: their bytes copied into shared chunks, and their place and header
 * in arrays by index, so that a lookup finds a block's pairs without the dependent reads an object per block costs.
 */
export class KeptBlocks {
  readonly chunks: Uint8Array[] = [];
  /** Per block, its chunk (-1: not kept) and the byte at which its keys start there. */
  readonly chunkOf: Int32Array;
  readonly keysAt: Float64Array;
  readonly kb: Uint8Array;
  readonly ib: Uint8Array;
  readonly count: Int32Array;
  bytes = 0;
  private used = 0;

  constructor(blocks: number) {
    this.chunkOf = new Int32Array(blocks).fill(-1);
    this.keysAt = new Float64Array(blocks);
    this.kb = new Uint8Array(blocks);
    this.ib = new Uint8Array(blocks);
    this.count = new Int32Array(blocks);
  }

  has(block: number): boolean {
    return this.chunkOf[block] >= 0;
  }

  keep(block: number, bytes: Uint8Array, at: number, header: BlockHeader): void {
    const { length } = header;
    let chunk = this.chunks[this.chunks.length - 1];
    if (chunk === undefined || this.used + length > chunk.length) {
      const size = chunk === undefined ? FIRST_CHUNK_BYTES : Math.min(MAX_CHUNK_BYTES, 2 * chunk.length);
      chunk = new Uint8Array(Math.max(size, length));
      this.chunks.push(chunk);
      this.used = 0;
    }
    chunk.set(bytes.subarray(at, at + length), this.used);
    this.chunkOf[block] = this.chunks.length - 1;
    this.keysAt[block] = this.used + BLOCK_HEADER;
    this.kb[block] = header.kb;
    this.ib[block] = header.ib;
    this.count[block] = header.count;
    this.used += length;
    this.bytes += length;
  }

  /** Drops these blocks and every chunk: the blocks of one lookup that are not kept. */
  clear(blocks: readonly number[]): void {
    for (const b of blocks) this.chunkOf[b] = -1;
    this.chunks.length = 0;
  }
}
