import { hash } from 'node:crypto';

/** A command a store client sent, as its failure may describe it (never the value, nor the key in clear). */
export interface StoreCommand {
  /** The command's name (`set`, `get`, `del`). */
  readonly name: string;
  /** The full key it addressed; only its digest is kept. */
  readonly key: string;
  /** The value written, for writes; only its length is kept. */
  readonly value?: string;
  /** What was sent after the value (`['PX', ttlMs, 'NX']`). */
  readonly options?: readonly (string | number)[];
}

/** What a {@link StoreCommandError} keeps of its command. */
export interface StoreCommandSummary {
  readonly name: string;
  /** `sha256:` and the base64url SHA-256 of the full key. */
  readonly keyDigest: string;
  /** Length of the value written, in UTF-16 code units; absent for reads and deletes. */
  readonly valueLength?: number;
  readonly options?: readonly (string | number)[];
}

/** The longest reply text an error carries (Redis's own are far shorter). */
const MAX_MESSAGE = 200;

/**
 * A command a store's client or server refused, built afresh so that it can be logged. Clients attach
 * what they sent to their errors (ioredis: every argument, as `command.args`): a cached 6 MB result
 * would go whole into a log line, and a key may name a confirmation's id. This keeps the original's
 * name, code and message (failure classifiers read those; a server's echo of the arguments is cut, and
 * the key and value are masked should they appear anyway) and summarises the command; nothing else of
 * the original is kept, neither as a property nor as its `cause`.
 */
export class StoreCommandError extends Error {
  readonly code?: string | number;
  readonly command: StoreCommandSummary;

  constructor(error: unknown, sent: StoreCommand) {
    const fields = readFields(error);
    super(safeMessage(fields.message, sent));
    this.name = fields.name;
    if (fields.code !== undefined) this.code = fields.code;
    this.command = {
      name: sent.name,
      keyDigest: `sha256:${hash('sha256', sent.key, 'base64url')}`,
      ...(sent.value === undefined ? {} : { valueLength: sent.value.length }),
      ...(sent.options === undefined ? {} : { options: sent.options }),
    };
  }
}

/** name, message and code, read without trusting the thrown value (a getter may throw). */
function readFields(error: unknown): { name: string; message: string; code: string | number | undefined } {
  const read = (field: 'name' | 'message' | 'code'): unknown => {
    try {
      return typeof error === 'object' && error !== null
        ? (error as Record<string, unknown>)[field]
        : undefined;
    } catch {
      return undefined;
    }
  };
  const [name, message, code] = [read('name'), read('message'), read('code')];
  return {
    name: typeof name === 'string' && name.length <= 100 ? name : 'Error',
    message: typeof message === 'string' ? message : 'the store client failed with something not an Error',
    code: typeof code === 'string' || typeof code === 'number' ? code : undefined,
  };
}

/**
 * The reply's words without what was sent: Redis echoes the first arguments of an unknown (or renamed)
 * command ("with args beginning with: ..."), so the text is cut there, stripped of the value and key
 * should they appear anyway, and cut to MAX_MESSAGE characters.
 */
function safeMessage(message: string, sent: StoreCommand): string {
  let text = message;
  const echo = text.search(/,? with args beginning with/i);
  if (echo >= 0) text = text.slice(0, echo);
  for (const [secret, shown] of [
    [sent.value, '<value>'],
    [sent.key, '<key>'],
  ] as const) {
    if (secret !== undefined && secret.length >= 4 && text.includes(secret))
      text = text.split(secret).join(shown);
  }
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}
