/**
 * Running the system tools the workload needs (mkfs, mount, losetup, xfs_db ...) with argument
 * arrays, never a shell, and a result that keeps the tool's own words for the error message.
 */
import { execFile } from 'node:child_process';

export type CommandResult =
  | { readonly ok: true; readonly stdout: string; readonly stderr: string }
  | {
      readonly ok: false;
      /** The program is not installed (ENOENT). */
      readonly missing: boolean;
      readonly exitCode: number | null;
      /** stderr, else stdout, trimmed: what the tool said. */
      readonly output: string;
    };

/** Runs `file` with `args`; resolves with the outcome instead of throwing on a non-zero exit. */
export function command(file: string, args: readonly string[], timeoutMs = 600_000): Promise<CommandResult> {
  return new Promise((resolve) => {
    execFile(file, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 16 * 1024 ** 2 }, (err, stdout, stderr) => {
      if (!err) {
        resolve({ ok: true, stdout, stderr });
        return;
      }
      const code = (err as NodeJS.ErrnoException & { code?: unknown }).code;
      resolve({
        ok: false,
        missing: code === 'ENOENT',
        exitCode: typeof code === 'number' ? code : null,
        output: (stderr.trim() || stdout.trim() || err.message).slice(0, 4000),
      });
    });
  });
}

/** `mkfs.xfs -i size=512 IMAGE`: a command line for the result's info, with the run's paths replaced. */
export function describeCommand(file: string, args: readonly string[], replace: Readonly<Record<string, string>>): string {
  return [file, ...args.map((a) => replace[a] ?? a)].join(' ');
}
