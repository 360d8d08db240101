import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * AES-256-GCM as every token layer uses it: IV(12) ‖ ciphertext ‖ tag(16), no associated data.
 * `open` answers null instead of throwing because a failed tag is an expected outcome for the service
 * (a forged or foreign token), and each caller maps it to its own wire answer.
 */

const IV_LENGTH = 12;
const TAG_LENGTH = 16;
export const GCM_OVERHEAD = IV_LENGTH + TAG_LENGTH;

export function seal(key: Buffer, plaintext: Buffer): Buffer {
  const iv = randomBytes(IV_LENGTH);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  return Buffer.concat([iv, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
}

export function open(key: Buffer, sealed: Buffer): Buffer | null {
  if (sealed.length < GCM_OVERHEAD) return null;
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(0, IV_LENGTH));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_LENGTH));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(IV_LENGTH, sealed.length - TAG_LENGTH)), decipher.final()]);
  } catch {
    return null;
  }
}
