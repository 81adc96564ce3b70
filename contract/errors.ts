/**
 * Every error fsbench reports carries a stable code (for scripts, dashboards and the HTTP layer)
 * and a message that tells the user what to change. Codes never change meaning once released.
 */

export const ERROR_CODES = {
  // Input: what the user asked for is wrong. HTTP 400.
  MATRIX_INVALID: 400,
  MATRIX_TOO_LARGE: 400,
  MATRIX_FILE_UNREADABLE: 400,
  CONFIG_INVALID: 400,
  // Environment: the machine cannot do what the cell asks for. Reported as failed runs.
  PRIVILEGE_MISSING: 500,
  MOUNT_FAILED: 500,
  TARGET_UNUSABLE: 500,
  LIMIT_WRITE_FAILED: 500,
  LIMIT_REACHED: 500,
  NATIVE_PROBE_MISSING: 500,
  PROBE_FAILED: 500,
  PROBE_OUTPUT_INVALID: 500,
  BACKEND_FAILED: 500,
  FS_REFUSED: 500,
  NO_SPACE: 500,
  LOOP_UNAVAILABLE: 500,
  WORKLOAD_FAILED: 500,
  SANDBOX_UNAVAILABLE: 500,
  SANDBOX_FAILED: 500,
  // Run control.
  CANCELLED: 499,
  TIMEOUT: 504,
  INTERNAL: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export class FsbenchError extends Error {
  override readonly name = 'FsbenchError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Where in the input the problem is, e.g. `params.bufferBytes[2]`, for HTTP 400 bodies. */
    readonly issues: readonly { path: string; message: string }[] = [],
  ) {
    super(message);
  }

  get httpStatus(): number {
    return ERROR_CODES[this.code];
  }
}

/** Turns anything thrown into an FsbenchError, keeping the message of unexpected errors. */
export function toFsbenchError(err: unknown, fallback: ErrorCode = 'INTERNAL'): FsbenchError {
  if (err instanceof FsbenchError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new FsbenchError(fallback, message);
}
