import { markConnectionFailure } from './database-error.js';

/**
 * How long past a statement's timeout the adapter waits for the server's reply before it takes the
 * connection for silent. The server answers every statement within its `statement_timeout` (a result
 * or 57014); a reply that is still missing a second later is lost: a NAT or firewall that dropped the
 * flow, a partition that sends no reset. Without a limit the call would wait forever and, with a pool,
 * its connection would stay checked out for good: a handful of lost replies starve every later call.
 */
export const REPLY_GRACE_MS = 1000;

// The longest delay Node's timers take. A longer one (a statement timeout near PostgreSQL's own limit,
// 2^31 - 1 ms, plus the grace) is cut to 1 ms with only a warning: the watch then took every
// connection for silent a millisecond after each statement was sent and closed it, so every call of
// such a tool answered `unavailable`. Clamped, the wait is PostgreSQL's own largest timeout (~24.8 days).
const MAX_TIMER_MS = 2_147_483_647;

/** The part of a connection a silent one is closed through (pg's Client: `end()` destroys its socket). */
interface Closable {
  end?(): unknown;
}

/** One per connection, reused by each of its statements: the success path allocates no timer. */
interface ReplyWatch {
  timer: ReturnType<typeof setTimeout>;
  readonly limitMs: number;
  /** Counts statements sent: only the last one sent clears `waiting` (pg answers them in order). */
  sent: number;
  /** Counts sends and replies, so a check scheduled before either never closes a connection that spoke. */
  progress: number;
  waiting: boolean;
  silenced: boolean;
}

const WATCH = Symbol('toolgate.sql.replyWatch');

/**
 * Settles with `pending`, the reply to a statement just sent on `connection` with `timeoutMs` as its
 * statement timeout. When no reply came `REPLY_GRACE_MS` after that timeout, the connection is closed
 * (so the statement fails and a pool drops the connection instead of keeping it) and the call rejects
 * with a connection failure (`unavailable`, retryable: the retry gets a connection of its own).
 */
export async function replyOf<T>(connection: object, timeoutMs: number, pending: Promise<T>): Promise<T> {
  const watch = watchOf(connection, Math.min(MAX_TIMER_MS, timeoutMs + REPLY_GRACE_MS));
  const mine = ++watch.sent;
  watch.progress += 1;
  watch.waiting = true;
  watch.timer.refresh();
  try {
    return await pending;
  } catch (error) {
    if (!watch.silenced) throw error;
    const silent = new Error(
      `no reply from the database within ${watch.limitMs} ms (statement timeout ${timeoutMs} ms); the connection was closed`,
      { cause: error },
    );
    throw markConnectionFailure(silent);
  } finally {
    if (watch.sent === mine) {
      watch.waiting = false;
    } else {
      // Statements sent together (a work function's Promise.all): pg queues them and runs the next
      // one now, so its wait starts now; clearing `waiting` here would leave it without a limit.
      watch.progress += 1;
      watch.timer.refresh();
    }
  }
}

function watchOf(connection: object, limitMs: number): ReplyWatch {
  const held = (connection as { [WATCH]?: ReplyWatch })[WATCH];
  if (held !== undefined && held.limitMs === limitMs) return held;
  // A connection shared by tools with other timeouts: a new watch (and timer) when the limit changes.
  if (held !== undefined) clearTimeout(held.timer);
  const watch: ReplyWatch = {
    timer: undefined as never,
    limitMs,
    sent: 0,
    progress: 0,
    waiting: false,
    silenced: false,
  };
  watch.timer = setTimeout(() => onLimit(connection as Closable, watch), limitMs);
  // Never keeps a process alive; between statements it fires once and finds nothing to do.
  watch.timer.unref();
  Object.defineProperty(connection, WATCH, { value: watch, configurable: true, writable: true });
  return watch;
}

function onLimit(connection: Closable, watch: ReplyWatch): void {
  if (!watch.waiting) return;
  const progress = watch.progress;
  // Timers run before I/O in a turn of the event loop: a reply that arrived during a stall gets that
  // turn before the connection is taken for silent.
  setImmediate(() => {
    if (!watch.waiting || watch.progress !== progress || typeof connection.end !== 'function') return;
    watch.silenced = true;
    try {
      // pg's Client destroys its socket when a query is active; its query then fails.
      Promise.resolve(connection.end()).catch(() => undefined);
    } catch {
      // A connection that cannot be closed stays as it is; nothing else can be done here.
    }
  });
}
