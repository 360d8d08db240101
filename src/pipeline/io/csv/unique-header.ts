/** Header names made usable as keys. */

/** Makes header names usable as keys: duplicates get `_2`, `_3`...; empty names become `colN`. */
export function uniqueHeader(names: string[]): { header: string[]; notes: string[] } {
  const notes: string[] = [];
  const seen = new Set<string>();
  const header: string[] = [];
  const taken = new Set(names);
  for (let i = 0; i < names.length; i++) {
    let name = names[i];
    if (name.trim() === '') {
      name = `col${i + 1}`;
      for (let k = 2; taken.has(name); k++) name = `col${i + 1}_${k}`;
      notes.push(`column ${i + 1} has no name in the header; calling it '${name}'`);
    } else if (seen.has(name)) {
      let k = 2;
      while (taken.has(`${name}_${k}`) || seen.has(`${name}_${k}`)) k++;
      const renamed = `${name}_${k}`;
      notes.push(`header name '${name}' appears more than once; column ${i + 1} is called '${renamed}'`);
      name = renamed;
    }
    seen.add(name);
    taken.add(name);
    header.push(name);
  }
  return { header, notes };
}
