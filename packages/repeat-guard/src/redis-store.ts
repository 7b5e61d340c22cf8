import { hash } from 'node:crypto';
import type { RedisRepeatClient, RedisRepeatStore, RedisRepeatStoreOptions } from './types.js';

/**
 * A store on Redis, shared by every replica of a server. Takes a connected ioredis client (or any
 * client with the same `get`, `set ... PX`, `del`); the caller owns its lifecycle. Expiry is
 * Redis's own (`PX`), so nothing needs sweeping.
 */
export function createRedisRepeatStore(
  redis: RedisRepeatClient,
  options: RedisRepeatStoreOptions = {},
): RedisRepeatStore {
  const prefix = options.prefix ?? 'toolgate:repeat:';
  return {
    prefix,
    async get(key) {
      try {
        return (await redis.get(prefix + key)) ?? undefined;
      } catch (error) {
        throw commandError(error, 'get', prefix + key);
      }
    },
    async set(key, value, ttlMs) {
      // PX takes a positive integer; a fraction of a millisecond left still means "expire now".
      const ms = Math.max(1, Math.ceil(ttlMs));
      try {
        await redis.set(prefix + key, value, 'PX', ms);
      } catch (error) {
        throw commandError(error, 'set', prefix + key, value, ['PX', ms]);
      }
    },
    async delete(key) {
      try {
        await redis.del(prefix + key);
      } catch (error) {
        throw commandError(error, 'del', prefix + key);
      }
    },
  };
}

/** The longest reply text an error carries (Redis's own are far shorter). */
const MAX_MESSAGE = 200;

/**
 * A command the client or Redis refused, as the guard logs it. ioredis hangs every argument of a failed
 * command on its error (`command.args`): the stored entry, a whole result with whatever customer data it
 * holds. This error keeps the original's name, code and message (Redis's echo of an unknown command's
 * arguments cut off) and summarises the command: its name, a digest of the key, the value's length.
 */
function commandError(
  error: unknown,
  name: string,
  key: string,
  value?: string,
  options?: readonly (string | number)[],
): Error {
  const read = (field: string): unknown => {
    try {
      return typeof error === 'object' && error !== null
        ? (error as Record<string, unknown>)[field]
        : undefined;
    } catch {
      return undefined;
    }
  };
  const [errorName, message, code] = [read('name'), read('message'), read('code')];
  let text = typeof message === 'string' ? message : 'the Redis client failed with something not an Error';
  const echo = text.search(/,? with args beginning with/i);
  if (echo >= 0) text = text.slice(0, echo);
  if (text.length > MAX_MESSAGE) text = `${text.slice(0, MAX_MESSAGE)}…`;
  const failure = new Error(text) as Error & { code?: string | number; command?: unknown };
  failure.name = typeof errorName === 'string' && errorName.length <= 100 ? errorName : 'Error';
  if (typeof code === 'string' || typeof code === 'number') failure.code = code;
  failure.command = {
    name,
    keyDigest: `sha256:${hash('sha256', key, 'base64url')}`,
    ...(value === undefined ? {} : { valueLength: value.length }),
    ...(options === undefined ? {} : { options }),
  };
  return failure;
}
