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
import { constants as fsConstants, promises as fs } from 'node:fs';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { FsbenchError, messageOf, errnoOf } from '../contract/errors.js';
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

/**
 * What is signed: a prefix naming the kind of thing, then its bytes. A signature over a job can
 * never pass for one over a report, an approval or anything else, whichever key made it.
 */
export const SIGNED = {
  job: 'fsbench run job v1\n',
  approval: 'fsbench agent approval v1\n',
  reportKey: 'fsbench coordinator report key v1\n',
  announcement: 'fsbench agent announcement v1\n',
  rotation: 'fsbench agent key rotation v1\n',
} as const;
type SignedKind = keyof typeof SIGNED;

function signedBytes(kind: SignedKind, text: string): Buffer {
  return Buffer.from(`${SIGNED[kind]}${text}`, 'utf8');
}

/** `SHA256:<base64>` of a public key (DER, no padding), as logs, `fsbench agents` and reports name keys. */
export function keyFingerprint(key: KeyObject): string {
  return `SHA256:${createHash('sha256').update(key.export({ type: 'spki', format: 'der' })).digest('base64').replace(/=+$/, '')}`;
}

/** Signs `text` of `kind` with an Ed25519 private key (base64). */
export function signText(key: KeyObject, kind: SignedKind, text: string): string {
  return sign(null, signedBytes(kind, text), key).toString('base64');
}

/** Whether `signature` is `key`'s over `text` of `kind`; false for anything malformed. */
export function verifyText(key: KeyObject, kind: SignedKind, text: string, signature: string): boolean {
  if (!JobSignature.safeParse(signature).success) return false;
  return verify(null, signedBytes(kind, text), key, Buffer.from(signature, 'base64'));
}

/** SHA-256 (base64url) of a signature: how a report names the issuance of the job it answers. */
export function signatureDigest(signature: string): string {
  return createHash('sha256').update(signature).digest('base64url');
}

/** What agents hold: checks signatures, and names the key by a fingerprint operators can compare. */
export class JobVerifier {
  /** `SHA256:<base64>` of the public key (DER), as the coordinator's and the agents' logs print it. */
  readonly fingerprint: string;
  readonly pem: string;

  constructor(private readonly key: KeyObject) {
    if (key.asymmetricKeyType !== 'ed25519') throw new FsbenchError('CONFIG_INVALID', `the job key is a ${key.asymmetricKeyType ?? 'unknown'} key; fsbench signs jobs with Ed25519`);
    this.pem = key.export({ type: 'spki', format: 'pem' }).toString();
    this.fingerprint = keyFingerprint(key);
  }

  verify(job: RunJob, signature: string): boolean {
    return verifyText(this.key, 'job', canonicalJson(job), signature);
  }

  /**
   * The last approval found valid, as its text and signature: an agent checks its own before every
   * run, and it changes only when the key is approved again, rotated or revoked. A signature over
   * the same text under the same key verifies the same way every time.
   */
  private lastApproval: string | undefined;

  /** An approval of an agent key (queue/enrollment.ts), which only the coordinator signs. */
  verifyApproval(value: unknown, signature: string): boolean {
    const text = canonicalJson(value);
    const seen = `${signature}\n${text}`;
    if (seen === this.lastApproval) return true;
    const valid = verifyText(this.key, 'approval', text, signature);
    if (valid) this.lastApproval = seen;
    return valid;
  }

  /** The coordinator's report key as it publishes it (queue/enrollment.ts). */
  verifyReportKey(publicKeyPem: string, signature: string): boolean {
    return verifyText(this.key, 'reportKey', publicKeyPem, signature);
  }
}

/** What the coordinator holds. */
export class JobSigner {
  readonly verifier: JobVerifier;

  constructor(private readonly key: KeyObject) {
    this.verifier = new JobVerifier(createPublicKey(key));
  }

  sign(job: RunJob): string {
    return signText(this.key, 'job', canonicalJson(job));
  }

  signApproval(value: unknown): string {
    return signText(this.key, 'approval', canonicalJson(value));
  }

  signReportKey(publicKeyPem: string): string {
    return signText(this.key, 'reportKey', publicKeyPem);
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
    if (!isErrno(err, 'ENOENT')) throw new FsbenchError('CONFIG_INVALID', `cannot read the job signing key ${file}: ${messageOf(err)}`);
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


/**
 * A private key of `type` in `file` (its directory checked already: only root controls it), made
 * with mode 0600 when missing. O_EXCL: processes starting at once share the first key; O_NOFOLLOW:
 * a symlink planted in its place is refused, never followed. `what` names it in errors.
 */
export async function loadOrCreatePrivateKey(file: string, type: 'ed25519' | 'x25519', what: string): Promise<KeyObject> {
  let pem: string | undefined;
  try {
    const handle = await fs.open(file, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    try {
      pem = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (errnoOf(err) === 'ELOOP') throw new FsbenchError('DIRECTORY_UNSAFE', `${file} is a symlink: remove it, and a key of its own is made`);
    if (errnoOf(err) !== 'ENOENT') throw new FsbenchError('CONFIG_INVALID', `cannot read ${what} ${file}: ${errnoOf(err) ?? 'unreadable'}`);
  }
  if (pem === undefined) {
    const fresh = (type === 'ed25519' ? generateKeyPairSync('ed25519') : generateKeyPairSync('x25519')).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    try {
      const handle = await fs.open(file, fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_WRONLY | fsConstants.O_NOFOLLOW, 0o600);
      try {
        await handle.writeFile(fresh);
        await handle.sync();
      } finally {
        await handle.close();
      }
      pem = fresh;
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw err;
      return loadOrCreatePrivateKey(file, type, what);
    }
  }
  let key: KeyObject;
  try {
    key = createPrivateKey(pem);
  } catch {
    // The parser's message could quote the file: say only where it is.
    throw new FsbenchError('CONFIG_INVALID', `${file} is not a PEM private key: remove it to have a new ${what} made`);
  }
  if (key.asymmetricKeyType !== type) throw new FsbenchError('CONFIG_INVALID', `${file} is not an ${type} key: remove it to have a new ${what} made`);
  return key;
}
