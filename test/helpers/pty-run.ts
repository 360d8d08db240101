// Runs the built CLI in a real pseudo-terminal (python3's pty module) and says how it ended.
import { execFile, execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BIN, ROOT } from './map-e2e-build.js';
import { cleanEnv } from './map-e2e-processes.js';

const DRIVER = join(dirname(fileURLToPath(import.meta.url)), 'pty-run.py');

export interface PtyRun {
  /** Window size the terminal reports; 0 x 0 is a pseudo-terminal nobody sized. */
  cols: number;
  rows: number;
  args: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Sent once `afterText` has appeared on the terminal (and `afterMs` more have passed); `close` hangs the terminal up. */
  action?: 'none' | 'SIGTERM' | 'SIGHUP' | 'SIGINT' | 'close';
  afterText?: string;
  afterMs?: number;
  /** The child is killed (by its pid) past these; the result says which limit it hit. */
  limitSeconds?: number;
  limitBytes?: number;
}

export interface PtyResult {
  exit_code: number | null;
  /** The signal that ended the child (1 = SIGHUP), when one did. */
  signal: number | null;
  seconds: number;
  /** Everything the child wrote to its terminal. */
  bytes: number;
  killed_for: 'time' | 'bytes' | null;
  /** The last 20,000 bytes of it. */
  tail: string;
}

let python: boolean | undefined;

/** python3 with its pty module: present on Linux and macOS CI machines. */
export function ptyAvailable(): boolean {
  if (python === undefined) {
    try {
      execFileSync('python3', ['-c', 'import pty, termios, fcntl'], { stdio: 'ignore' });
      python = process.platform !== 'win32';
    } catch {
      python = false;
    }
  }
  return python;
}

export function runInPty(run: PtyRun): Promise<PtyResult> {
  const spec = {
    argv: [process.execPath, BIN, ...run.args],
    cwd: run.cwd ?? ROOT,
    env: cleanEnv({ TERM: 'xterm-256color', ...run.env }),
    cols: run.cols,
    rows: run.rows,
    action: run.action ?? 'none',
    after_text: run.afterText ?? '',
    after_ms: run.afterMs ?? 0,
    limit_s: run.limitSeconds ?? 20,
    limit_bytes: run.limitBytes ?? 1_000_000,
  };
  return new Promise((resolve, reject) => {
    execFile('python3', [DRIVER, JSON.stringify(spec)], { maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`the pseudo-terminal driver failed: ${stderr || err.message}`));
      else resolve(JSON.parse(stdout) as PtyResult);
    });
  });
}
