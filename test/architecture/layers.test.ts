// The one-way layers of src/: no import circle between files or between the folders of cli/ and pipeline/, and
// each layer imports only the layers below it.
import { describe, expect, it } from 'vitest';
import { cycles, folderGraph, importGraph } from './import-graph.js';

/** Layer (first folder under src/, or index.ts) -> the layers it may import. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  cli: ['config', 'pipeline', 'client', 'state', 'service', 'identity', 'protocol'],
  'index.ts': ['sdk', 'config', 'pipeline', 'client', 'state', 'identity', 'protocol'],
  sdk: ['config', 'pipeline', 'client', 'service', 'identity', 'protocol'],
  pipeline: ['identity', 'protocol', 'client', 'state'],
  client: ['protocol'],
  state: ['identity'],
  config: [],
  service: ['protocol', 'identity'],
  identity: [],
  protocol: [],
};

/** Commands open no store and send nothing: the jobs in pipeline/ do (the state commands' own folder aside). */
const OPENS_NO_STORE = (file: string): boolean => file.startsWith('cli/') && !file.startsWith('cli/state/');

/** The only files outside service/ that may start or use the local service (the library's startLocalService too). */
const SERVICE_USERS = [/^cli\/serve\//, /^cli\/shared\/embedded-service\.ts$/, /^sdk\/local-service\.ts$/];

const layerOf = (file: string): string => file.split('/')[0];

describe('import graph of src/', () => {
  const graph = importGraph();

  it('is read from the source (a file that imports nothing known would mean the reader is broken)', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('cli/main.ts')).toContain('cli/commands.ts');
  });

  it('has no circle between files', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('has no circle between the folders of cli/ and pipeline/', () => {
    const folders = folderGraph(graph, 2);
    const inside = new Map([...folders].filter(([f]) => f.startsWith('cli/') || f.startsWith('pipeline/')));
    for (const [folder, targets] of inside)
      inside.set(
        folder,
        targets.filter((t) => inside.has(t)),
      );
    expect(cycles(inside)).toEqual([]);
  });

  it('imports only downwards between layers', () => {
    const wrong: string[] = [];
    for (const [file, targets] of graph) {
      const allowed = MAY_IMPORT[layerOf(file)];
      expect(allowed, `layer of ${file}`).toBeDefined();
      for (const target of targets) {
        const layer = layerOf(target);
        if (layer !== layerOf(file) && !allowed.includes(layer)) wrong.push(`${file} -> ${target}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('opens the state and the client only in the jobs, not in the commands', () => {
    const wrong = [...graph]
      .filter(([file]) => OPENS_NO_STORE(file))
      .flatMap(([file, targets]) =>
        targets.filter((t) => layerOf(t) === 'state' || layerOf(t) === 'client').map((t) => `${file} -> ${t}`),
      );
    expect(wrong).toEqual([]);
  });

  it('uses the local service only from serve, the embedded-service starter and startLocalService', () => {
    const wrong = [...graph]
      .filter(([file]) => layerOf(file) !== 'service' && !SERVICE_USERS.some((re) => re.test(file)))
      .flatMap(([file, targets]) => targets.filter((t) => layerOf(t) === 'service').map((t) => `${file} -> ${t}`));
    expect(wrong).toEqual([]);
  });
});
