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

function safeStringify(value: unknown): string {
  const seen = new WeakSet<object>();
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item instanceof Error) {
      return { name: item.name, message: item.message, stack: item.stack, ...describeExtra(item) };
    }
    if (typeof item === 'bigint') return item.toString();
    if (typeof item === 'object' && item !== null) {
      if (seen.has(item)) return '[Circular]';
      seen.add(item);
    }
    return item;
  });
}

function describeExtra(error: Error): Record<string, unknown> {
  const extra: Record<string, unknown> = {};
  for (const key of Object.keys(error)) extra[key] = (error as unknown as Record<string, unknown>)[key];
  if (error.cause !== undefined) extra.cause = error.cause;
  return extra;
}
