import type { Logger } from '@toolgate/core';

/**
 * One kind of trouble (a failing sink, dropped records), logged at most once per interval: the first
 * occurrence at once, then one line per interval with the counts since the last line, never one line
 * per batch or per call (an outage at 10,000 calls/s must not flood the log it is reported in).
 */
export class IncidentLog {
  readonly #logger: Logger;
  readonly #level: 'error' | 'warn';
  readonly #message: string;
  readonly #intervalMs: number;
  #events = 0;
  #records = 0;
  #fields: Record<string, unknown> = {};
  #timer: NodeJS.Timeout | undefined;

  constructor(logger: Logger, level: 'error' | 'warn', message: string, intervalMs: number) {
    this.#logger = logger;
    this.#level = level;
    this.#message = message;
    this.#intervalMs = intervalMs;
  }

  /** Counts one event of `records` records; `fields` (the latest) go with the next line. */
  note(records: number, fields: Record<string, unknown>): void {
    this.#events += 1;
    this.#records += records;
    this.#fields = fields;
    if (this.#timer) return;
    this.flush();
    const tick = (): void => {
      if (this.#events === 0) {
        this.#timer = undefined;
        return;
      }
      this.flush();
      this.#timer = setTimeout(tick, this.#intervalMs).unref();
    };
    this.#timer = setTimeout(tick, this.#intervalMs).unref();
  }

  /** Logs what was counted since the last line, if anything. */
  flush(): void {
    if (this.#events === 0) return;
    this.#logger[this.#level](
      { ...this.#fields, events: this.#events, records: this.#records },
      this.#message,
    );
    this.#events = 0;
    this.#records = 0;
  }

  /** Forgets what was counted (a later line says it all) and stops the timer. */
  reset(): void {
    this.#events = 0;
    this.#records = 0;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Logs the rest and stops the timer. */
  close(): void {
    this.flush();
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
