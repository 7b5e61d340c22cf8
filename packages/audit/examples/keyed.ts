// The README's keyed-chain example, typechecked with the package (see usage.ts).
import {
  type AuditHead,
  createAudit,
  createFileSink,
  readAuditKeyFile,
  verifyAuditFile,
} from '../src/index.js';

// The key file as the CLI reads it: its bytes, less one trailing newline (`openssl rand -hex 32 > ...`).
const key = readAuditKeyFile('/run/secrets/audit.key');
declare const heads: { save(head: AuditHead): Promise<void>; load(): Promise<AuditHead> };

export const audit = createAudit({
  sink: createFileSink('/var/log/orders/audit.jsonl'),
  chainId: process.env.POD_NAME,
  key,
});

// Now and then (a timer, each flush): keep the stored head where the log's writers cannot reach.
setInterval(() => {
  const head = audit.head();
  if (head) void heads.save(head);
}, 60_000).unref();

// Later, anywhere that has the key and the kept head:
const result = await verifyAuditFile('/var/log/orders/audit.jsonl', {
  keys: [key], // after a rotation: every key still in the log
  expect: await heads.load(),
});
if (!result.intact) throw new Error(`audit log broken at record ${result.brokenAt}: ${result.reason}`);
