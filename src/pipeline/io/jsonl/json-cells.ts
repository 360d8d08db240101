/** JSON Lines values as cells, and the nesting guard that keeps writing them from overflowing the stack. */

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A JSONL value as a cell: text stays text, numbers and booleans become their JSON text, null becomes ''. */
export function cellText(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** The deepest a JSON Lines value may nest (the line's object is level 1). */
export const MAX_JSON_DEPTH = 1000;

/**
 * Whether JSON text nests arrays and objects deeper than `max`. Most lines have few brackets: their count bounds the
 * depth, and is found with native searches; only a line with more than `max` of them is walked.
 */
export function nestedDeeperThan(text: string, max: number): boolean {
  let opening = 0;
  for (let i = text.indexOf('['); i !== -1 && opening <= max; i = text.indexOf('[', i + 1)) opening++;
  for (let i = text.indexOf('{'); i !== -1 && opening <= max; i = text.indexOf('{', i + 1)) opening++;
  if (opening <= max) return false;
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}
