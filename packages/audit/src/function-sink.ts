import type { AuditRecord, AuditSink, ChainHead } from './types.js';

export interface FunctionSinkOptions {
  /** The last record your store holds, so a restart continues its chain. @default () => undefined */
  head?: (chainId: string) => Promise<ChainHead | undefined>;
}

/** A sink that hands each batch of records to your function (resolve once they are stored). */
export function createFunctionSink(
  write: (records: readonly AuditRecord[]) => void | Promise<void>,
  options: FunctionSinkOptions = {},
): AuditSink {
  const sink: AuditSink = {
    async write(batch) {
      await write(batch.records);
    },
  };
  if (options.head) sink.head = options.head;
  return sink;
}
