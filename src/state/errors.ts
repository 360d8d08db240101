/** Errors of the state file: each message names the file, what is wrong and what to do (exit 2 unless said). */
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
    requestedFingerprint: string,
  ) {
    super(
      `state file ${path} was made for environment ${storedFingerprint}, but this run is for ${requestedFingerprint}; ` +
        `a state file never mixes environments: use another --state file for ${requestedFingerprint}`,
      path,
    );
  }
}

/** A rollback journal left by a run killed while it wrote: only a writing open can roll it back. */
export class StateJournalError extends StateError {
  constructor(path: string) {
    super(
      `state file ${path} has a rollback journal (${path}-journal) left by a run that was killed while it wrote; ` +
        `a command that writes the file rolls it back (uid2-batch state checkpoint ${path}), then read it again`,
      path,
    );
  }
}

/** An environment variable's setting of how state files are opened that cannot be used. */
export class StateSettingError extends StateError {}

/** Not SQLite, not a uid2-batch state, or a schema this version cannot read. */
export class StateFormatError extends StateError {}

export class StateNotFoundError extends StateError {
  constructor(path: string, message: string) {
    super(message, path);
  }
}

export class StateLockedError extends StateError {
  constructor(path: string, lockPath: string, holderPid: number | null, holderStartedAt: string | null) {
    const who =
      holderPid === null
        ? 'another uid2-batch run'
        : `another uid2-batch run (pid ${holderPid}, started at ${holderStartedAt ?? 'an unknown time'})`;
    super(`${who} is using ${path}; wait for it or remove ${lockPath} if that process is gone`, path);
  }
}

/** A failure a run reports with exit 1, its message meant for the user as it is. */
class StateRunError extends StateError {
  readonly exitCode = 1;
  readonly userMessage = this.message;
}

/** A checkpoint that could not finish while another process reads the file: a later run can. */
export class StateBusyError extends StateRunError {
  constructor(path: string) {
    super(`state file ${path} is being read by another process: the checkpoint could not finish; run it again`, path);
  }
}

/** A write on a file opened read-only (a dry run). */
export class StateReadonlyError extends StateError {
  constructor(path: string, what: string) {
    super(`state file ${path} is open read-only (dry run); cannot ${what}`, path);
  }
}

/** A stored value failed its checksum: the run stops (exit 1) before it writes or sends anything from it. */
export class StateDamagedError extends StateRunError {
  constructor(path: string, what: string) {
    super(
      `state file ${path} is damaged (${what} fails its checksum); restore it from a backup, ` +
        `or save what is still readable with \`uid2-batch state export ${path}\` and map again with a new --state file`,
      path,
    );
  }
}
