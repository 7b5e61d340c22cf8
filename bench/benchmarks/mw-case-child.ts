// One in-process bench case alone in its process (see src/case-process.ts): builds the case named in
// argv (`bare`, `empty`, `full` or a policy's name in `fullStack`), then times rounds on request over
// IPC. OTEL_SDK=1 registers a real OTel SDK first and enters a context once, as an instrumented
// server does.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { context } from '@opentelemetry/api';
import { createCallTimer } from '@toolgate/bench-harness';
import { registerOtelSdk } from '../src/otel-sdk.js';
import { buildCase, echoCall } from './middleware.bench.js';

const which = process.argv[2] ?? 'bare';
if (process.env.OTEL_SDK === '1') {
  registerOtelSdk();
  // AsyncLocalStorage's promise hooks (Node 20) turn on with the first context entered: on in every
  // case's process alike, as in any instrumented server.
  context.with(context.active(), () => undefined);
}
const dir = await mkdtemp(join(tmpdir(), 'toolgate-mw-case-'));
const { client, close } = await buildCase(which, dir);
const call = echoCall(client);
const time = createCallTimer();

type Request = { type: 'round'; calls: number; concurrency: number } | { type: 'close' };
process.on('message', (message: Request) => {
  if (message.type === 'round') {
    void time(call, message.calls, message.concurrency).then((us) => process.send!({ type: 'result', us }));
    return;
  }
  void (async () => {
    await close();
    await rm(dir, { recursive: true, force: true });
    process.send!({ type: 'closed' }, () => process.exit(0));
  })();
});
process.send!({ type: 'ready' });
