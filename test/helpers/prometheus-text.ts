// A strict reader of the Prometheus text exposition format (0.0.4), for tests of --metrics-file.

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface PromFile {
  types: Record<string, string>;
  help: Record<string, string>;
  samples: PromSample[];
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function parseValue(text: string, where: string): number {
  if (text === '+Inf') return Number.POSITIVE_INFINITY;
  if (text === '-Inf') return Number.NEGATIVE_INFINITY;
  if (text === 'NaN') return Number.NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) throw new Error(`${where}: bad value '${text}'`);
  return Number(text);
}

/** Reads `{a="x",b="y"}` from `line` at `start`; returns the labels and the index after `}`. */
function parseLabels(line: string, start: number, where: string): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start + 1;
  while (line[i] !== '}') {
    const eq = line.indexOf('=', i);
    if (eq < 0) throw new Error(`${where}: label without '='`);
    const name = line.slice(i, eq);
    if (!LABEL_NAME.test(name) || name.startsWith('__')) throw new Error(`${where}: bad label name '${name}'`);
    if (name in labels) throw new Error(`${where}: label '${name}' twice`);
    if (line[eq + 1] !== '"') throw new Error(`${where}: label value not quoted`);
    let value = '';
    let j = eq + 2;
    for (;;) {
      const c = line[j];
      if (c === undefined) throw new Error(`${where}: unterminated label value`);
      if (c === '"') break;
      if (c === '\\') {
        const next = line[j + 1];
        if (next === '\\') value += '\\';
        else if (next === '"') value += '"';
        else if (next === 'n') value += '\n';
        else throw new Error(`${where}: bad escape '\\${next}' in a label value`);
        j += 2;
      } else {
        value += c;
        j++;
      }
    }
    labels[name] = value;
    i = j + 1;
    if (line[i] === ',') i++;
    else if (line[i] !== '}') throw new Error(`${where}: expected ',' or '}' after a label`);
  }
  return { labels, end: i + 1 };
}

/**
 * Parses `text` by the format's rules, strictly: LF line ends and a final LF, HELP and TYPE at most once per
 * metric and before its samples, the samples of one metric together, valid names, quoted and escaped label
 * values, a number as the value, no sample twice. Throws on the first breach.
 */
export function parsePrometheusText(text: string): PromFile {
  if (!text.endsWith('\n')) throw new Error('the file does not end with a line feed');
  if (text.includes('\r')) throw new Error('carriage return in the file');
  const out: PromFile = { types: {}, help: {}, samples: [] };
  const finished = new Set<string>();
  const seen = new Set<string>();
  let current: string | undefined;
  const enter = (name: string, where: string): void => {
    if (name === current) return;
    if (current !== undefined) finished.add(current);
    if (finished.has(name)) throw new Error(`${where}: lines of ${name} are not together`);
    current = name;
  };
  const lines = text.slice(0, -1).split('\n');
  lines.forEach((line, index) => {
    const where = `line ${index + 1}`;
    if (line.trim() === '') return;
    if (line.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (m === null) return; // a comment
      const [, kind, name, rest] = m as unknown as [string, string, string, string];
      if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name '${name}'`);
      enter(name, where);
      if (kind === 'HELP') {
        if (name in out.help) throw new Error(`${where}: HELP of ${name} twice`);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) throw new Error(`${where}: bad escape in HELP`);
        out.help[name] = rest.replace(/\\(\\|n)/g, (_, c: string) => (c === 'n' ? '\n' : '\\'));
      } else {
        if (name in out.types) throw new Error(`${where}: TYPE of ${name} twice`);
        if (!TYPES.has(rest)) throw new Error(`${where}: bad type '${rest}'`);
        if (out.samples.some((s) => s.name === name)) throw new Error(`${where}: TYPE of ${name} after its samples`);
        out.types[name] = rest;
      }
      return;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd <= 0) throw new Error(`${where}: not a sample line`);
    const name = line.slice(0, nameEnd);
    if (!METRIC_NAME.test(name)) throw new Error(`${where}: bad metric name '${name}'`);
    enter(name, where);
    let labels: Record<string, string> = {};
    let i = nameEnd;
    if (line[i] === '{') ({ labels, end: i } = parseLabels(line, i, where));
    if (line[i] !== ' ') throw new Error(`${where}: expected a space before the value`);
    const fields = line.slice(i + 1).split(' ');
    if (fields.length > 2 || fields[0] === '') throw new Error(`${where}: expected a value and at most a timestamp`);
    if (fields[1] !== undefined && !/^-?\d+$/.test(fields[1])) throw new Error(`${where}: bad timestamp`);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) throw new Error(`${where}: the same sample twice`);
    seen.add(key);
    out.samples.push({ name, labels, value: parseValue(fields[0] as string, where) });
  });
  return out;
}

/** The value of the one sample named `name` whose labels include `labels`. */
export function sampleValue(file: PromFile, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = file.samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match`);
  return found[0]?.value;
}
