/** What a program adapter may be told besides the root: where to look for programs and keep its state. */
export interface ProgramOptions {
  /** PATH to find the program on (default: this process's PATH). */
  readonly path?: string;
  /** The interpreter watchdog_observer.py runs with (default: Debian's /usr/bin/python3, the one python3-watchdog installs for). */
  readonly python?: string;
  /** Where a program's private state lives while it runs (watchman's socket and log; default: the system's temporary directory). */
  readonly tmpDir?: string;
}
