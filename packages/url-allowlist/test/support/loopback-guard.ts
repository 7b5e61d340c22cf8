// Hostile-network safety net: whatever the code under test does, no socket in a test process may
// dial anything but loopback. A refused attempt fails like an unreachable network (the socket
// errors asynchronously) and is recorded; every test then asserts that none was made.
import net from 'node:net';
import { afterEach, expect } from 'vitest';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Destinations refused since the last test ended. */
export const refusedConnects: string[] = [];

type Connect = (this: net.Socket, ...args: unknown[]) => net.Socket;
const original = net.Socket.prototype.connect as unknown as Connect;

function destinationOf(args: unknown[]): { host: string; port: unknown } | undefined {
  // net.connect() passes its normalised [options, callback] array as the first argument.
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  if (typeof first === 'object' && first !== null) {
    const options = first as { host?: string; port?: unknown; path?: string };
    if (typeof options.path === 'string' && options.path !== '') return undefined;
    return { host: options.host ?? 'localhost', port: options.port };
  }
  if (typeof first === 'string' && !/^\d+$/.test(first)) return undefined;
  return { host: typeof args[1] === 'string' ? args[1] : 'localhost', port: first };
}

(net.Socket.prototype as unknown as { connect: Connect }).connect = function guardedConnect(...args) {
  const destination = destinationOf(args);
  if (destination && !LOOPBACK.has(destination.host)) {
    refusedConnects.push(`${destination.host}:${String(destination.port)}`);
    process.nextTick(() => {
      this.destroy(Object.assign(new Error('loopback guard: ENETUNREACH'), { code: 'ENETUNREACH' }));
    });
    return this;
  }
  return original.apply(this, args);
};

afterEach(() => {
  const attempts = refusedConnects.splice(0);
  expect(attempts, 'a test tried to connect outside loopback').toEqual([]);
});
