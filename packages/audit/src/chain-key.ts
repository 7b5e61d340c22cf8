import { createHmac, createSecretKey, hash as digest, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AuditKey } from './types.js';

/** Fewest bytes a chain key may have: HMAC-SHA256's own output size. */
export const MIN_KEY_BYTES = 32;

/** Prefix of what a key id hashes, so the id is no digest of the key alone that another use might share. */
const KEY_ID_LABEL = Buffer.from('toolgate-audit key id\0', 'utf8');

const KEY_ID = /^[0-9a-f]{16}$/;

/**
 * A chain key, ready to hash records: HMAC-SHA256 under the key instead of SHA-256. `id` names it in
 * every record it hashes (`keyId`) without revealing it: the first 16 hex digits of SHA-256 of a
 * fixed label and the key. The key itself stays inside (a `KeyObject` prints no bytes).
 */
export class ChainKey {
  readonly id: string;
  /** `,"keyId":"..."`: the record's field, in its sorted place after `incidentId`. */
  readonly field: string;
  readonly #key: KeyObject;

  constructor(bytes: Uint8Array) {
    this.#key = createSecretKey(bytes);
    this.id = digest('sha256', Buffer.concat([KEY_ID_LABEL, bytes]), 'hex').slice(0, 16);
    this.field = `,"keyId":"${this.id}"`;
  }

  /** HMAC-SHA256 (hex) of a record's canonical JSON without `hash`, as text or its UTF-8 bytes. */
  hash(canonical: string | Uint8Array): string {
    return createHmac('sha256', this.#key).update(canonical).digest('hex');
  }
}

/**
 * A key given in options as a `ChainKey`: a string is its UTF-8 bytes, a Buffer or Uint8Array its
 * bytes; shorter than 32 bytes is refused (`name` says whose option it was).
 */
export function chainKeyOf(key: AuditKey, name: string): ChainKey {
  let bytes: Uint8Array;
  if (typeof key === 'string') bytes = Buffer.from(key, 'utf8');
  else if (key instanceof Uint8Array) bytes = key;
  else throw new TypeError(`${name} must be a string, a Buffer or a Uint8Array`);
  if (bytes.length < MIN_KEY_BYTES) {
    throw new RangeError(`${name} must be at least ${MIN_KEY_BYTES} bytes (got ${bytes.length})`);
  }
  return new ChainKey(bytes);
}

/** Verifier keys (one or a list, for rotation) by key id. */
export function chainKeysOf(keys: AuditKey | readonly AuditKey[], name: string): Map<string, ChainKey> {
  const list = Array.isArray(keys) ? (keys as readonly AuditKey[]) : [keys as AuditKey];
  if (list.length === 0) throw new RangeError(`${name} must hold at least one key`);
  const byId = new Map<string, ChainKey>();
  for (const key of list) {
    const chainKey = chainKeyOf(key, name);
    byId.set(chainKey.id, chainKey);
  }
  return byId;
}

/** Whether a record's `keyId` is the form a key id takes (16 lower-case hex digits). */
export function isKeyId(value: unknown): value is string {
  return typeof value === 'string' && KEY_ID.test(value);
}

/**
 * A chain key from a file, read the one way the application and `toolgate-audit verify --key-file`
 * both read it: the file's bytes, less one trailing newline (`\n` or `\r\n`, what `echo`, an editor or
 * `openssl rand -hex 32 > file` adds). A text key's characters are the key, not decoded. Throws when
 * the file cannot be read; `createAudit` and the verifiers refuse a key shorter than 32 bytes.
 */
export function readAuditKeyFile(path: string): Buffer {
  const bytes = readFileSync(path);
  if (bytes[bytes.length - 1] !== 0x0a) return bytes;
  return bytes.subarray(0, bytes.length - (bytes[bytes.length - 2] === 0x0d ? 2 : 1));
}
