/**
 * Signed jobs. Whoever can write to Redis can put a job on a queue that passes the contract, and
 * an agent runs as root with SYS_ADMIN: the queue alone must not be what makes a run happen. The
 * coordinator signs each job's data with an Ed25519 key that never leaves its data directory;
 * agents are given the public key by the operator and run only what it verifies.
 *
 * What is signed is a canonical serialization of the job data (object keys sorted, no spaces),
 * so the signature survives BullMQ's JSON round trip whatever order the keys come back in, and
 * is checked against the very data the agent parsed and is about to run.
 */
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FsbenchError } from '../contract/errors.js';
import { JobSignature, type RunJob } from './jobs.js';

/** The coordinator's private key, in its data directory (mode 0600). */
export const JOB_KEY_FILE = 'job-key.pem';
/** The public key beside it, for operators to give to agents (FSBENCH_JOB_KEY). */
export const JOB_PUBLIC_KEY_FILE = 'job-key.pub.pem';

/**
 * Keys sorted at every level, arrays in order, `undefined` properties left out (as JSON.stringify
 * does): the same bytes for the same data however it was built or parsed.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v: unknown) => canonicalJson(v ?? null)).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** A prefix of the signed bytes, so a signature over a job can never pass for one over anything else. */
function signedBytes(job: RunJob): Buffer {
  return Buffer.from(`fsbench run job v1\n${canonicalJson(job)}`, 'utf8');
}

/** What agents hold: checks signatures, and names the key by a fingerprint operators can compare. */
export class JobVerifier {
  /** `SHA256:<base64>` of the public key (DER), as the coordinator's and the agents' logs print it. */
  readonly fingerprint: string;
  readonly pem: string;

  constructor(private readonly key: KeyObject) {
    if (key.asymmetricKeyType !== 'ed25519') throw new FsbenchError('CONFIG_INVALID', `the job key is a ${key.asymmetricKeyType ?? 'unknown'} key; fsbench signs jobs with Ed25519`);
    this.pem = key.export({ type: 'spki', format: 'pem' }).toString();
    this.fingerprint = `SHA256:${createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('base64').replace(/=+$/, '')}`;
  }

  verify(job: RunJob, signature: string): boolean {
    if (!JobSignature.safeParse(signature).success) return false;
    return verify(null, signedBytes(job), this.key, Buffer.from(signature, 'base64'));
  }
}

/** What the coordinator holds. */
export class JobSigner {
  readonly verifier: JobVerifier;

  constructor(private readonly key: KeyObject) {
    this.verifier = new JobVerifier(createPublicKey(key));
  }

  sign(job: RunJob): string {
    return sign(null, signedBytes(job), this.key).toString('base64');
  }
}

function isErrno(err: unknown, code: string): boolean {
  return err instanceof Error && 'code' in err && err.code === code;
}

/**
 * The coordinator's signing key from its data directory, made on first start. The private key
 * file is created with mode 0600 (and put back to 0600 should it have been widened); the public
 * key is written again beside it at every start, so it always matches.
 */
export async function loadOrCreateJobKey(dir: string): Promise<{ signer: JobSigner; created: boolean; publicKeyFile: string }> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, JOB_KEY_FILE);
  let created = false;
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
    await chmod(file, 0o600);
  } catch (err) {
    if (!isErrno(err, 'ENOENT')) throw new FsbenchError('CONFIG_INVALID', `cannot read the job signing key ${file}: ${err instanceof Error ? err.message : String(err)}`);
    const { privateKey } = generateKeyPairSync('ed25519');
    pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    try {
      // 'wx': a second coordinator starting on the same directory at once keeps the first key.
      await writeFile(file, pem, { mode: 0o600, flag: 'wx' });
      created = true;
    } catch (e) {
      if (!isErrno(e, 'EEXIST')) throw e;
      pem = await readFile(file, 'utf8');
    }
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    // The parser's message could quote the file: it is a secret, so say only where it is.
    throw new FsbenchError('CONFIG_INVALID', `${file} is not a PEM private key: remove it to have the coordinator make a new one (agents then need the new public key)`);
  }
  const signer = new JobSigner(key);
  const publicKeyFile = path.join(dir, JOB_PUBLIC_KEY_FILE);
  await writeFile(publicKeyFile, signer.verifier.pem, { mode: 0o644 });
  return { signer, created, publicKeyFile };
}

/** Writes the public key to one more place (FSBENCH_JOB_KEY_COPY), for agents that read it from a shared volume. */
export async function writePublicKeyCopy(file: string, verifier: JobVerifier): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, verifier.pem, { mode: 0o644 });
}

/**
 * The agent's side: FSBENCH_JOB_KEY is the public key itself (PEM text, as an environment
 * variable carries it to another machine) or the path of a file holding it.
 */
export async function loadJobVerifier(setting: string | undefined): Promise<JobVerifier> {
  if (setting === undefined) {
    throw new FsbenchError(
      'CONFIG_INVALID',
      `FSBENCH_JOB_KEY is not set: an agent runs only jobs signed by its coordinator, so give it the coordinator's public key ` +
        `(the file ${JOB_PUBLIC_KEY_FILE} in the coordinator's FSBENCH_DATA_DIR, as PEM text or its path)`,
    );
  }
  const inline = setting.trimStart().startsWith('-----BEGIN');
  let pem = setting;
  if (!inline) {
    try {
      pem = await readFile(setting, 'utf8');
    } catch (err) {
      throw new FsbenchError('CONFIG_INVALID', `FSBENCH_JOB_KEY: cannot read ${setting}: ${err instanceof Error && 'code' in err ? String(err.code) : 'unreadable'}`);
    }
  }
  const where = inline ? 'FSBENCH_JOB_KEY' : `FSBENCH_JOB_KEY (${setting})`;
  if (/PRIVATE KEY/.test(pem)) {
    throw new FsbenchError('CONFIG_INVALID', `${where} holds a private key: give agents the coordinator's public key (${JOB_PUBLIC_KEY_FILE}) and keep ${JOB_KEY_FILE} on the coordinator`);
  }
  let key: KeyObject;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new FsbenchError('CONFIG_INVALID', `${where} is not a PEM public key: use the coordinator's ${JOB_PUBLIC_KEY_FILE}`);
  }
  return new JobVerifier(key);
}

/** Makes (or loads) a coordinator's key before it starts, so agents can be given its public key first (tests, benches). */
export async function writeNewJobKey(dir: string): Promise<JobVerifier> {
  const { signer } = await loadOrCreateJobKey(dir);
  return signer.verifier;
}
