/** The error of a typed output cell that is not what its column says (a bug of the tool, not of the input). */

/**
 * A cell of one of the tool's own columns that is not what its type says: a bug of the tool, not of the input.
 * Plain fields, so it survives the trip back from a worker thread.
 */
export class ParquetCellError extends Error {
  constructor(
    readonly column: string,
    readonly expected: string,
  ) {
    super(`column '${column}' holds a value that is not a ${expected}`);
    this.name = 'ParquetCellError';
  }
}
