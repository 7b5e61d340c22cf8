import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';

/** Whether a server's transport carries only the person who started the server (see `isLocalTransport`). */
export type LocalTransportRule = (transport: Transport) => boolean;

// A second copy of the SDK (its CommonJS build beside the ESM one core imports, a bundled copy) has
// classes of its own, which instanceof does not know. The app author chooses the transport class, never
// a caller, so its name is as trustworthy as the class itself.
const LOCAL_CLASS_NAMES = new Set(['StdioServerTransport', 'InMemoryTransport']);

/**
 * Core's rule for a local transport: the SDK's `StdioServerTransport` (the person who started the server,
 * on its stdin) or `InMemoryTransport` (a client in the same process), or a subclass of either, from this
 * copy of the SDK or another. Any other transport is remote, whatever it carries.
 */
export function isLocalTransport(transport: Transport): boolean {
  if (transport instanceof StdioServerTransport || transport instanceof InMemoryTransport) return true;
  for (
    let proto: unknown = Object.getPrototypeOf(transport);
    proto !== null && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    const ctor = Object.hasOwn(proto as object, 'constructor')
      ? (proto as { constructor: unknown }).constructor
      : undefined;
    if (typeof ctor === 'function' && LOCAL_CLASS_NAMES.has(ctor.name)) return true;
  }
  return false;
}
