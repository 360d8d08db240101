import type { EngineState } from '../pipeline/engine.js';

/** The state file as `map` uses it: the engine's lookups and commits, plus the runs table. */
export interface MapStateFile {
  engineState: EngineState;
  beginRun(command: string, input: string): void;
  endRun(outcome: string, rows: number): void;
  close(): void;
}

export interface MapStateOptions {
  envFingerprint: string;
  readonly: boolean;
}

export function openMapState(path: string, options: MapStateOptions): MapStateFile {
  void options;
  throw new Error(`--state ${path}: the state file is not available in this build yet`);
}
