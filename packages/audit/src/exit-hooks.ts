const SIGNALS = ['SIGTERM', 'SIGINT'] as const;

/**
 * Runs `close` when the process is about to end: on `beforeExit` (the event loop ran dry) and on
 * SIGTERM / SIGINT. A signal handler replaces Node's default "exit at once", so after closing it
 * re-raises the signal when no other listener is left, and the process still dies of it.
 * `process.exit()` cannot wait for anything: call `close()` before it. Returns the unhook function.
 */
export function onProcessExit(close: () => Promise<void>): () => void {
  const unhook = (): void => {
    process.off('beforeExit', onBeforeExit);
    for (const signal of SIGNALS) process.off(signal, onSignal);
  };
  const onBeforeExit = (): void => {
    unhook();
    void close();
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    unhook();
    void close().finally(() => {
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  };
  process.on('beforeExit', onBeforeExit);
  for (const signal of SIGNALS) process.on(signal, onSignal);
  return unhook;
}
