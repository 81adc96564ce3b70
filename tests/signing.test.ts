/**
 * The job key's signatures over approvals, as agents check theirs before every run: an approval
 * once found valid is not verified again, and that shortcut must never let through what a full
 * check would refuse.
 */
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Approval } from '../queue/enrollment.js';
import { JobSigner } from '../queue/signing.js';

const approval = (machine: string): Approval => ({
  key: 'SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
  publicKey: '-----BEGIN PUBLIC KEY-----\nagent\n-----END PUBLIC KEY-----\n',
  reportKey: '-----BEGIN PUBLIC KEY-----\nreport\n-----END PUBLIC KEY-----\n',
  hostId: 'host-1',
  machine,
  id: 'aaaaaaaaaaaaaaaaaaaaaa',
  expiresAt: Date.now() + 60_000,
});

describe('a job verifier checking approvals', () => {
  it('having accepted one, still refuses it altered, signed by another key or with a signature of another approval', () => {
    const signer = new JobSigner(generateKeyPairSync('ed25519').privateKey);
    const stranger = new JobSigner(generateKeyPairSync('ed25519').privateKey);
    const verifier = signer.verifier;
    const a = approval('alpha');
    const b = approval('beta');
    const signedA = signer.signApproval(a);
    const signedB = signer.signApproval(b);

    expect(verifier.verifyApproval(a, signedA)).toBe(true);
    // Asked again, as before every run: the same answer.
    expect(verifier.verifyApproval(a, signedA)).toBe(true);
    expect(verifier.verifyApproval({ ...a, machine: 'gamma' }, signedA)).toBe(false);
    expect(verifier.verifyApproval({ ...a, expiresAt: a.expiresAt + 1 }, signedA)).toBe(false);
    expect(verifier.verifyApproval(a, stranger.signApproval(a))).toBe(false);
    expect(verifier.verifyApproval(a, signedB)).toBe(false);
    expect(verifier.verifyApproval(a, 'not a signature')).toBe(false);
    // Another valid approval takes the place of the first, which still verifies.
    expect(verifier.verifyApproval(b, signedB)).toBe(true);
    expect(verifier.verifyApproval(b, signedA)).toBe(false);
    expect(verifier.verifyApproval(a, signedA)).toBe(true);
  });
});
