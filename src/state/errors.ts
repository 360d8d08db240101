/**
 * Errors of the state file. Each message names the file, what is wrong and what to do, and never holds a
 * secret or an identifier: the CLI can show it as it is (a usage/configuration error, exit code 2).
 */
export class StateError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The file was made for another environment: integ and prod raw UIDs must never meet in one file. */
export class StateEnvMismatchError extends StateError {
  constructor(
    path: string,
    readonly storedFingerprint: string,
    readonly requestedFingerprint: string,
  ) {
    super(
      `state file ${path} was made for environment ${storedFingerprint}, but this run is for ${requestedFingerprint}; ` +
        `a state file never mixes environments: use another --state file for ${requestedFingerprint}`,
      path,
    );
  }
}

/**
 * A rollback journal beside the file, left by a run killed while it wrote (SQLite writes a new file's switch to WAL
 * through one): the next writing open rolls it back, a read-only one cannot.
 */
export class StateJournalError extends StateError {
  constructor(path: string) {
    super(
      `state file ${path} has a rollback journal (${path}-journal) left by a run that was killed while it wrote; ` +
        `a command that writes the file rolls it back (uid2-batch state checkpoint ${path}), then read it again`,
      path,
    );
  }
}

/** A setting of how state files are opened (an environment variable) that cannot be used. */
export class StateSettingError extends StateError {}

/** Not SQLite, not a uid2-batch state, or a schema this version cannot read. */
export class StateFormatError extends StateError {}

/** The file does not exist and the command does not create one. */
export class StateNotFoundError extends StateError {
  constructor(
    path: string,
    message = `state file ${path} does not exist; create it with \`uid2-batch map --state ${path}\` first, or check the path`,
  ) {
    super(message, path);
  }
}

/** Another live run holds the lock of the file. */
export class StateLockedError extends StateError {
  constructor(
    path: string,
    readonly lockPath: string,
    readonly holderPid: number | null,
    readonly holderStartedAt: string | null,
  ) {
    const who =
      holderPid === null
        ? 'another uid2-batch run'
        : `another uid2-batch run (pid ${holderPid}, started at ${holderStartedAt ?? 'an unknown time'})`;
    super(`${who} is using ${path}; wait for it or remove ${lockPath} if that process is gone`, path);
  }
}

/** A checkpoint that could not finish: another process reads the file. Exit 1: a later run can finish it. */
export class StateBusyError extends StateError {
  readonly exitCode = 1;
  readonly userMessage: string;
  constructor(path: string) {
    super(`state file ${path} is being read by another process: the checkpoint could not finish; run it again`, path);
    this.userMessage = this.message;
  }
}

/** A write on a file opened read-only (a dry run). */
export class StateReadonlyError extends StateError {
  constructor(path: string, what: string) {
    super(`state file ${path} is open read-only (dry run); cannot ${what}`, path);
  }
}

/**
 * A stored record failed its checksum: the file is damaged, and reading on would give wrong answers (raw UIDs the
 * service never gave, changes that are not). The run stops (exit 1) before it writes or sends anything from it. A
 * re-run would meet the same damage, so the message says how to recover instead.
 */
export class StateDamagedError extends StateError {
  readonly exitCode = 1;
  readonly userMessage: string;
  constructor(path: string, what: string) {
    super(
      `state file ${path} is damaged (${what} fails its checksum); restore it from a backup, ` +
        `or save what is still readable with \`uid2-batch state export ${path}\` and map again with a new --state file`,
      path,
    );
    this.userMessage = this.message;
  }
}
