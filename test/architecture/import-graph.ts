/** The import graph of src/, read from the source text: files, their relative imports, and folder rollups. */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';

export const SRC = join(dirname(new URL(import.meta.url).pathname), '..', '..', 'src');

/** Every .ts file under src/, as a path relative to src/ with forward slashes. */
export function sourceFiles(dir = SRC): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts')) files.push(relative(SRC, path).split('\\').join('/'));
  }
  return files.sort();
}

// static imports and re-exports (`import ... from`, `export ... from`, `import '...'`) and import() with a literal
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.{1,2}\/[^'"]+)\1/g;

/** file -> the files of src/ it imports (type-only imports included: they tie the code together too). */
export function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles()) {
    const text = readFileSync(join(SRC, file), 'utf8');
    const targets = new Set<string>();
    for (const match of text.matchAll(SPECIFIER)) {
      const target = posix.normalize(posix.join(posix.dirname(file), match[2])).replace(/\.js$/, '.ts');
      targets.add(target);
    }
    graph.set(file, [...targets].sort());
  }
  return graph;
}

/** Every cycle's members (strongly connected components of more than one node, or a node importing itself). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indexOf = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string): void => {
    indexOf.set(node, index);
    low.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indexOf.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node) as number, low.get(next) as number));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node) as number, indexOf.get(next) as number));
      }
    }
    if (low.get(node) === indexOf.get(node)) {
      const members: string[] = [];
      let member: string;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        members.push(member);
      } while (member !== node);
      if (members.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(members.sort());
    }
  };
  for (const node of graph.keys()) if (!indexOf.has(node)) visit(node);
  return found;
}

/** The graph with each file replaced by its folder `depth` levels deep (`pipeline/map`), self-edges dropped. */
export function folderGraph(graph: Map<string, string[]>, depth: number): Map<string, string[]> {
  const folderOf = (file: string): string => {
    const parts = file.split('/');
    return parts.length > depth ? parts.slice(0, depth).join('/') : parts.slice(0, -1).join('/') || file;
  };
  const folders = new Map<string, Set<string>>();
  for (const [file, targets] of graph) {
    const from = folderOf(file);
    const set = folders.get(from) ?? new Set<string>();
    for (const target of targets) if (folderOf(target) !== from) set.add(folderOf(target));
    folders.set(from, set);
  }
  return new Map([...folders].map(([k, v]) => [k, [...v].sort()]));
}
