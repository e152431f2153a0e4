// One ns-daemon per state file (spec §5.16 "[D] an exclusive lock file next to the SQLite DB", issue 20): the daemon
// holds an EXCLUSIVE SQLite transaction on `<state file>.lock` for its whole life. The lock is the kernel's POSIX
// advisory lock under SQLite, so it goes away with the process however it ends (SIGKILL included): never a stale
// lock to clean up, never a PID to guess. A second daemon on the same state file finds it held and refuses to start.
import Database from 'better-sqlite3';

export class StateFileLockedError extends Error {
  constructor(readonly lockFile: string) {
    super(`the state file is in use by another ns-daemon (lock ${lockFile} is held)`);
    this.name = 'StateFileLockedError';
  }
}

export interface StateFileLock {
  readonly lockFile: string;
  release(): void;
}

/** Take the state file's lock or throw StateFileLockedError (no waiting: busy_timeout 0). */
export const lockStateFile = (stateFile: string): StateFileLock => {
  const lockFile = `${stateFile}.lock`;
  const db = new Database(lockFile);
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('journal_mode = DELETE');
    db.exec('BEGIN EXCLUSIVE'); // held, never committed: released when the connection (or the process) ends
  } catch (e) {
    db.close();
    if (e instanceof Error && /SQLITE_BUSY|database is locked/.test(`${(e as { code?: string }).code} ${e.message}`))
      throw new StateFileLockedError(lockFile);
    throw e;
  }
  return {
    lockFile,
    release: () => {
      if (db.open) db.close();
    },
  };
};
