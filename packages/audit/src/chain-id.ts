import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

const CHAIN_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * A chain id for this process: host name, pid and 8 random hex digits, so two replicas (or a
 * restarted pid on the same host) never write the same chain.
 */
export function defaultChainId(): string {
  const host =
    hostname()
      .replace(/[^\x21-\x7e]/g, '_')
      .slice(0, 64) || 'host';
  return `${host}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** Checks a chain id given in options: printable ASCII without spaces, 1 to 128 characters. */
export function checkChainId(chainId: string): string {
  if (!CHAIN_ID.test(chainId)) {
    throw new TypeError('createAudit: chainId must be 1 to 128 printable ASCII characters without spaces');
  }
  return chainId;
}
