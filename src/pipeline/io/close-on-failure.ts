/** Lets go of an opened input at once when the work on it fails. */

/**
 * Runs `work` on an opened input and, when it fails (a column not found, a service error), closes the input's
 * file then: left to the collector, Node closes it later with a warning on stderr, after the run's error line.
 */
export async function closeOnFailure<T, I extends { close?(): void }>(
  input: I,
  work: (input: I) => Promise<T>,
): Promise<T> {
  try {
    return await work(input);
  } catch (err) {
    input.close?.();
    throw err;
  }
}
