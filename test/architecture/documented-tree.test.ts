// The folder trees of the README and docs/architecture.md name every folder of src/ once, and no folder that is gone.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function foldersUnder(dir: string, prefix: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .flatMap((e) => [`${prefix}${e.name}/`, ...foldersUnder(join(dir, e.name), `${prefix}${e.name}/`)]);
}

/** The `src/...` folders a document's tree block lists: lines that start with a folder path. */
function documentedFolders(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(/^(src\/(?:[\w-]+\/)+)\s/gm)].map((m) => m[1].slice('src/'.length));
}

describe.each(['README.md', 'docs/architecture.md'])('the tree in %s', (file) => {
  const actual = foldersUnder('src', '').sort();
  const documented = documentedFolders(file).sort();

  it('is found (a tree of at least the layers)', () => {
    expect(documented.length).toBeGreaterThanOrEqual(8);
  });

  it('names every folder of src/', () => {
    expect(actual.filter((f) => !documented.includes(f))).toEqual([]);
  });

  it('names each folder once', () => {
    expect(documented.filter((f, i) => documented.indexOf(f) !== i)).toEqual([]);
  });

  it('names no folder that does not exist', () => {
    expect(documented.filter((f) => !actual.includes(f))).toEqual([]);
  });
});
