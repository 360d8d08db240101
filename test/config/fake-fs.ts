import type { ConfigDeps } from '../../src/config/index.js';

/** An in-memory machine for resolveConfig: files with modes, a home directory, collected warnings. */
export function fakeMachine(files: Record<string, string | { text: string; mode: number }> = {}, home = '/home/ana') {
  const warnings: string[] = [];
  const table = new Map(
    Object.entries(files).map(([p, f]) => [p, typeof f === 'string' ? { text: f, mode: 0o100600 } : f]),
  );
  const notFound = (path: string) => Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' });
  const deps: ConfigDeps = {
    readFile(path) {
      const f = table.get(path);
      if (!f) throw notFound(path);
      return f.text;
    },
    statMode(path) {
      const f = table.get(path);
      if (!f) throw notFound(path);
      return f.mode;
    },
    homedir: () => home,
    platform: 'linux',
    warn: (m) => warnings.push(m),
  };
  return { deps, warnings };
}

export const API_KEY_VALUE = 'UID2-C-L-999-fCXrMM.fsR3mDqAXELtWWMS+xG1s7RdgRTMqdOH2qaAo=';
export const SECRET_VALUE = 'DzBzbjTJcYL0swDtFs2krRNu+g1Eokm2tBU4dEuD0Wk=';
export const OTHER_SECRET = Buffer.alloc(32, 7).toString('base64');
