import { describe, expect, it } from 'vitest';
import { StoreCommandError } from '../src/index.js';

describe('StoreCommandError', () => {
  it("keeps the refusal's name, code and words, and only a digest of the key and the value's length", () => {
    const refused = Object.assign(new Error("OOM command not allowed when used memory > 'maxmemory'."), {
      name: 'ReplyError',
      command: { name: 'set', args: ['orders:{c-1}:key', 'jane.doe@example.com 4711', 'PX', 60000] },
    });
    const error = new StoreCommandError(refused, {
      name: 'set',
      key: 'orders:{c-1}:key',
      value: 'jane.doe@example.com 4711',
      options: ['PX', 60000],
    });
    expect(error).toBeInstanceOf(Error);
    expect({ ...error, name: error.name, message: error.message }).toEqual({
      name: 'ReplyError',
      message: "OOM command not allowed when used memory > 'maxmemory'.",
      command: {
        name: 'set',
        keyDigest: 'sha256:KPTiVTJvRcI19V1DD8P5K0O95Og0oWTz6azcFI7iEZ0',
        valueLength: 25,
        options: ['PX', 60000],
      },
    });
    expect(JSON.stringify(error)).not.toContain('jane.doe');
    expect(error.cause).toBeUndefined();
  });

  it("cuts Redis's echo of the arguments and masks the key and value wherever they appear", () => {
    const echo = new StoreCommandError(
      new Error("ERR unknown command 'set', with args beginning with: 'orders:k' 'secret-value' "),
      { name: 'set', key: 'orders:k', value: 'secret-value' },
    );
    expect(echo.message).toBe("ERR unknown command 'set'");
    const masked = new StoreCommandError(new Error('WRONGTYPE at orders:k holding secret-value'), {
      name: 'set',
      key: 'orders:k',
      value: 'secret-value',
    });
    expect(masked.message).toBe('WRONGTYPE at <key> holding <value>');
    expect(new StoreCommandError(new Error('x'.repeat(500)), { name: 'get', key: 'k' }).message).toBe(
      `${'x'.repeat(200)}…`,
    );
  });

  it('a thrown value that is not an Error, or whose getters throw, still gives an Error naming the command', () => {
    const hostile = Object.defineProperty({}, 'message', {
      get() {
        throw new Error('boom');
      },
    });
    for (const thrown of ['a string', undefined, hostile]) {
      const error = new StoreCommandError(thrown, { name: 'del', key: 'k' });
      expect(error).toMatchObject({
        name: 'Error',
        message: 'the store client failed with something not an Error',
        command: { name: 'del' },
      });
    }
  });
});
