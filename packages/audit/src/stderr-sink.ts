import type { AuditBatch, AuditSink } from './types.js';

export interface StderrSinkOptions {
  /** Where lines go; stdout is refused (it belongs to the stdio transport). @default process.stderr */
  stream?: NodeJS.WritableStream;
}

/** JSON lines on stderr, one record a line: the default sink. */
export function createStderrSink(options: StderrSinkOptions = {}): AuditSink {
  const stream = options.stream ?? process.stderr;
  if (stream === process.stdout) throw new TypeError('createStderrSink: stdout belongs to the MCP transport');
  return {
    write(batch: AuditBatch): Promise<void> {
      return new Promise((resolve, reject) => {
        stream.write(batch.bytes, (error) => (error ? reject(error) : resolve()));
      });
    },
  };
}
