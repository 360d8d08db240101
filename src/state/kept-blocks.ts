/** The key blocks a level reader keeps in memory: their bytes packed in shared chunks, their headers by block index. */
import { BLOCK_HEADER, type BlockHeader } from './key-blocks.js';

// the first chunk's size, doubled for each next one up to the most: a small level takes little memory
const FIRST_CHUNK_BYTES = 1 << 16;
const MAX_CHUNK_BYTES = 1 << 20;

/**
 * Blocks kept by their index among a level's blocks. Their bytes are copied one after the other into chunks of up
 * to a MiB (never across two; a block bigger than a chunk, a key shared by very many pairs, gets its own), and
 * each one's header is kept in arrays by index, so that a lookup finds where a block's pairs are and how wide
 * without touching the block itself: a block held in its own buffer behind an object costs a lookup three
 * dependent reads from memory before its first pair, and these are the lookup's main cost once blocks are kept.
 */
export class KeptBlocks {
  readonly chunks: Uint8Array[] = [];
  /** Per block, its chunk (-1: not kept) and the byte at which its keys start there. */
  readonly chunkOf: Int32Array;
  readonly keysAt: Float64Array;
  /** Per block, its header. */
  readonly kb: Uint8Array;
  readonly ib: Uint8Array;
  readonly count: Int32Array;
  /** The bytes of the blocks kept. */
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

  /** Keeps a copy of block `block`: `length` bytes at `at` of `bytes`, whose header is `header`. */
  keep(block: number, bytes: Uint8Array, at: number, length: number, header: BlockHeader): void {
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
}
