/** Physical line numbers of a byte stream, for messages that name the line a problem is on. */

/**
 * Physical line numbers for byte offsets, counted from the bytes: a line ends at LF, or at a CR not followed by
 * LF, so files whose lines end differently from one line to the next are counted right too.
 * Queries must come with non-decreasing offsets (records and errors arrive in file order).
 */
export class LineIndex {
  private terminators: number[] = [];
  private head = 0;
  private passed = 0;
  /** A CR that ended the previous read: a terminator unless the next read starts with LF. */
  private pendingCr = -1;

  /** `firstLine`: the line of offset 0 (a piece of a file starts further down). */
  constructor(private readonly firstLine = 1) {}

  add(buf: Buffer, start: number): void {
    if (this.pendingCr !== -1) {
      if (buf.length === 0) return;
      if (buf[0] !== 10) this.terminators.push(this.pendingCr);
      this.pendingCr = -1;
    }
    let lf = buf.indexOf(10);
    let cr = buf.indexOf(13);
    while (lf !== -1 || cr !== -1) {
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        if (cr + 1 === buf.length) this.pendingCr = start + cr;
        else if (buf[cr + 1] !== 10) this.terminators.push(start + cr);
        cr = buf.indexOf(13, cr + 1);
      } else {
        this.terminators.push(start + lf);
        lf = buf.indexOf(10, lf + 1);
      }
    }
  }

  /** The 1-based line the byte at `offset` is on. */
  lineAt(offset: number): number {
    const ts = this.terminators;
    while (this.head < ts.length && ts[this.head] < offset) this.head++;
    if (this.head > 8192) {
      this.passed += this.head;
      this.terminators = ts.slice(this.head);
      this.head = 0;
    }
    const pending = this.pendingCr !== -1 && this.pendingCr < offset ? 1 : 0;
    return this.passed + this.head + pending + this.firstLine;
  }
}
