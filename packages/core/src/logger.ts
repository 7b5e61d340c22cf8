import type { Logger } from './types.js';

const LEVELS = { debug: 20, info: 30, warn: 40, error: 50 } as const;
export type LogLevel = keyof typeof LEVELS;

export interface StderrLoggerOptions {
  /** Lowest level written. @default 'info' */
  level?: LogLevel;
  /** Added to every line, e.g. `{ service: 'order-service' }`. @default {} */
  base?: Record<string, unknown>;
  /** Where lines go. @default process.stderr */
  stream?: { write(chunk: string): unknown };
}

/**
 * A logger that writes one JSON line per entry to stderr (never stdout, which belongs to the stdio
 * transport). pino's `pino(pino.destination(2))` fits the same `Logger` shape where more is needed.
 */
export function createStderrLogger(options: StderrLoggerOptions = {}): Logger {
  const threshold = LEVELS[options.level ?? 'info'];
  const base = options.base ?? {};
  const stream = options.stream ?? process.stderr;
  const write = (level: LogLevel) => (fields: Record<string, unknown>, message?: string) => {
    if (LEVELS[level] < threshold) return;
    const line = { level, time: new Date().toISOString(), ...base, ...fields, msg: message };
    stream.write(`${safeStringify(line)}\n`);
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

/** A logger that drops everything (tests, benchmarks). */
export function createSilentLogger(): Logger {
  const drop = (): void => {};
  return { debug: drop, info: drop, warn: drop, error: drop };
}

/**
 * One JSON line, whatever the fields hold: an error's cause chain (loops cut as `[Circular]`), an
 * AggregateError's `errors`, symbols and bigints as text. A field JSON cannot write (a `toJSON`, getter
 * or proxy trap that throws, a chain too deep) is written as `[Unreadable: why]` and the others as usual,
 * so the line that carries an incident id is never lost.
 */
function safeStringify(line: Record<string, unknown>): string {
  try {
    return JSON.stringify(line, logReplacer());
  } catch {
    const parts: string[] = [];
    for (const key of Object.keys(line)) {
      let text: string | undefined;
      try {
        text = JSON.stringify(line[key], logReplacer());
      } catch (error) {
        text = JSON.stringify(`[Unreadable: ${reasonOf(error)}]`);
      }
      if (text !== undefined) parts.push(`${JSON.stringify(key)}:${text}`);
    }
    return `{${parts.join(',')}}`;
  }
}

function logReplacer(): (key: string, item: unknown) => unknown {
  const seen = new WeakSet<object>();
  return (_key, item) => {
    if (typeof item === 'bigint' || typeof item === 'symbol') return item.toString();
    if (typeof item !== 'object' || item === null) return item;
    if (seen.has(item)) return '[Circular]';
    seen.add(item);
    return item instanceof Error ? describeError(item) : item;
  };
}

function describeError(error: Error): Record<string, unknown> {
  const out: Record<string, unknown> = {
    name: readSafely(error, 'name'),
    message: readSafely(error, 'message'),
    stack: readSafely(error, 'stack'),
  };
  for (const key of Object.keys(error)) out[key] = readSafely(error, key);
  const cause = readSafely(error, 'cause');
  if (cause !== undefined) out.cause = cause;
  // Not enumerable, and an AggregateError's message is often empty: its errors are what happened.
  if (error instanceof AggregateError) out.errors = readSafely(error, 'errors');
  return out;
}

function readSafely(object: object, key: string): unknown {
  try {
    return (object as Record<string, unknown>)[key];
  } catch (error) {
    return `[Unreadable: ${reasonOf(error)}]`;
  }
}

function reasonOf(error: unknown): string {
  try {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } catch {
    return 'unknown';
  }
}
