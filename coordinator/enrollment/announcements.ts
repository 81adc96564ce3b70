/**
 * What the coordinator reads of an agent's announcement in Redis (queue/enrollment.ts): anyone
 * who reaches Redis can write one, so nothing of it counts until it is signed by the key it
 * names, and that key and its report key are of the kinds the protocol uses.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { Announcement, AnnouncementEntry, parseJson } from '../../queue/enrollment.js';
import { keyFingerprint, verifyText } from '../../queue/signing.js';

/** An announcement signed by the key it names, or null (logged nowhere: anyone can write junk there). */
export function verifiedAnnouncement(key: string, raw: string): Announcement | null {
  const entry = parseJson(AnnouncementEntry, raw);
  if (!entry) return null;
  const body = parseJson(Announcement, entry.body);
  if (!body) return null;
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey(body.publicKey);
  } catch {
    return null;
  }
  if (publicKey.asymmetricKeyType !== 'ed25519' || keyFingerprint(publicKey) !== key) return null;
  try {
    if (createPublicKey(body.reportKey).asymmetricKeyType !== 'x25519') return null;
  } catch {
    return null;
  }
  return verifyText(publicKey, 'announcement', entry.body, entry.signature) ? body : null;
}
