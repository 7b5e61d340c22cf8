// Node names the path it could not use in its error, whatever the path looks like, and a relative one
// (`config/…`, a file name with a space, one segment) used to reach the model. Every failure here is
// real: a readFile, a rename and a spawn of relative paths that exist under no working directory (their
// first segments are a fresh temp directory's name), and a private key from node:crypto echoed by a
// loopback upstream. What the model can read (content, `_meta`, structuredContent) holds none of it;
// the log line under the incident id the model sees keeps the paths.
import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { defineTool, ERROR_CODE_DEFAULTS, fail, REDACTED, type ToolResult } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, rejection, seenEnvelope, serve } from './helpers.js';

let scratch: string;
let unique: string;
const paths = { read: '', from: '', to: '', command: '', argument: '' };

beforeAll(async () => {
  scratch = await fs.mkdtemp(join(tmpdir(), 'redact-rel-'));
  unique = basename(scratch);
  paths.read = `config/${unique}/secrets.json`;
  paths.from = `${unique}-gone/monthly report.csv`;
  paths.to = `${unique}-archive`;
  paths.command = `bin/${unique}/tool`;
  paths.argument = `--config=${unique}.ini`;
});
afterAll(async () => {
  await fs.rm(scratch, { recursive: true, force: true });
});
afterEach(closeAll);

type NodeError = NodeJS.ErrnoException & { dest?: string };

async function nodeFailure(kind: 'read' | 'rename' | 'spawn'): Promise<NodeError> {
  if (kind === 'read') return (await rejection(() => fs.readFile(paths.read, 'utf8'))) as NodeError;
  if (kind === 'rename') return (await rejection(() => fs.rename(paths.from, paths.to))) as NodeError;
  return (await rejection(
    () =>
      new Promise((resolve, reject) =>
        spawn(paths.command, [paths.argument]).on('error', reject).on('exit', resolve),
      ),
  )) as NodeError;
}

// A careless handler: the caught error's message in the failure, its JSON and its fields (`{ ...error }`)
// in `_meta`, both in structuredContent; or the error thrown as it is.
const loadSettings = defineTool({
  name: 'load_settings',
  description: 'Loads settings from disk (test).',
  input: { kind: z.enum(['read', 'rename', 'spawn']), mode: z.enum(['returned', 'thrown']) },
  handler: async ({ kind, mode }): Promise<ToolResult> => {
    const error = await nodeFailure(kind);
    if (mode === 'thrown') throw error;
    const result = fail('internal', `could not load settings: ${error.message}`);
    result._meta = {
      ...result._meta,
      'acme/fs': { message: error.message, json: JSON.stringify(error), fields: { ...error } },
    };
    result.structuredContent = { message: error.message, json: JSON.stringify(error) };
    return result;
  },
});

async function call(kind: 'read' | 'rename' | 'spawn', mode: 'returned' | 'thrown') {
  const entries: LogEntry[] = [];
  const client = await serve([loadSettings], [createRedactErrors()], recordingLogger(entries));
  const result = await client.callTool('load_settings', { kind, mode });
  const envelope = seenEnvelope(result);
  expect(envelope.incidentId).toMatch(INCIDENT_ID);
  const logged = entries.filter((entry) => entry.fields.incidentId === envelope.incidentId);
  expect(logged.length).toBeGreaterThan(0);
  return { result, envelope, logged: JSON.stringify(logged) };
}

/** Nothing of the relative paths anywhere the model can read. */
function expectNoPath(result: CallToolResult): void {
  const seen = JSON.stringify(result);
  for (const part of [unique, 'config/', 'secrets.json', 'monthly report', 'bin/']) {
    expect(seen, `leaked ${part}`).not.toContain(part);
  }
}

const INTERNAL = { ok: false, error: 'internal', hint: ERROR_CODE_DEFAULTS.internal.hint, retryable: false };

describe('real Node errors with relative paths, through a real client', () => {
  it('Node gives the errors this suite expects', async () => {
    expect(await nodeFailure('read')).toMatchObject({
      code: 'ENOENT',
      message: `ENOENT: no such file or directory, open '${paths.read}'`,
    });
    expect(await nodeFailure('rename')).toMatchObject({
      code: 'ENOENT',
      message: `ENOENT: no such file or directory, rename '${paths.from}' -> '${paths.to}'`,
    });
    expect(await nodeFailure('spawn')).toMatchObject({
      code: 'ENOENT',
      message: `spawn ${paths.command} ENOENT`,
      spawnargs: [paths.argument],
    });
  });

  it("a returned readFile('config/…') failure: the model reads '[path]', the log keeps the path", async () => {
    const { result, envelope, logged } = await call('read', 'returned');
    expect(envelope).toEqual({
      ...INTERNAL,
      message: "could not load settings: ENOENT: no such file or directory, open '[path]'",
      incidentId: envelope.incidentId,
    });
    expect(result._meta?.['acme/fs']).toEqual({
      message: "ENOENT: no such file or directory, open '[path]'",
      json: '{"errno":-2,"code":"ENOENT","syscall":"open","path":"[path]"}',
      fields: { errno: -2, code: 'ENOENT', syscall: 'open', path: '[path]' },
    });
    expectNoPath(result);
    expect(logged).toContain(paths.read);
  });

  it('a returned rename of two missing relative paths (a space, one segment): both go, the log keeps both', async () => {
    const { result, envelope, logged } = await call('rename', 'returned');
    expect(envelope.message).toBe(
      "could not load settings: ENOENT: no such file or directory, rename '[path]' -> '[path]'",
    );
    expect(result._meta?.['acme/fs']).toEqual({
      message: "ENOENT: no such file or directory, rename '[path]' -> '[path]'",
      json: '{"errno":-2,"code":"ENOENT","syscall":"rename","path":"[path]","dest":"[path]"}',
      fields: { errno: -2, code: 'ENOENT', syscall: 'rename', path: '[path]', dest: '[path]' },
    });
    // Core's boundary rebuilds a failure from its envelope: the structuredContent never arrives.
    expect(result.structuredContent).toBeUndefined();
    expectNoPath(result);
    expect(JSON.stringify(result)).not.toContain('-archive');
    expect(logged).toContain(paths.from);
    expect(logged).toContain(paths.to);
  });

  it('a returned spawn of a relative command: the command path and its arguments go', async () => {
    const { result, envelope, logged } = await call('spawn', 'returned');
    expect(envelope.message).toBe('could not load settings: spawn [path] ENOENT');
    expect(result._meta?.['acme/fs']).toEqual({
      message: 'spawn [path] ENOENT',
      json: '{"errno":-2,"code":"ENOENT","syscall":"spawn [path]","path":"[path]","spawnargs":["[REDACTED]"]}',
      fields: {
        errno: -2,
        code: 'ENOENT',
        syscall: 'spawn [path]',
        path: '[path]',
        spawnargs: '[REDACTED]',
      },
    });
    expectNoPath(result);
    expect(JSON.stringify(result)).not.toContain('--config');
    expect(logged).toContain(paths.command);
  });

  for (const kind of ['read', 'rename', 'spawn'] as const) {
    it(`a thrown ${kind} failure is internal; the log line under its incident id has the whole error`, async () => {
      const { result, envelope, logged } = await call(kind, 'thrown');
      expect(envelope).toEqual({ ...INTERNAL, message: 'Internal error.', incidentId: envelope.incidentId });
      expectNoPath(result);
      const error = await nodeFailure(kind);
      expect(logged).toContain(JSON.stringify(error.message).slice(1, -1));
      expect(logged).toContain(JSON.stringify(error.path).slice(1, -1));
    });
  }
});

describe('a private key body an upstream echoes, through a real client', () => {
  // The key's DER body in a JSON field (PEM's lines joined by `\n`), as a signing service that refuses
  // the request and echoes it back sends it: no PEM header, so core's block rule does not see it.
  const der = generateKeyPairSync('rsa', { modulusLength: 2048 })
    .privateKey.export({ format: 'der', type: 'pkcs8' })
    .toString('base64');
  const body = (der.match(/.{1,64}/g) ?? []).join('\n');
  let upstream: Server;
  let url: string;
  beforeAll(async () => {
    upstream = createServer((request, response) => {
      let received = '';
      request.on('data', (chunk: Buffer) => {
        received += chunk.toString('utf8');
      });
      request.on('end', () => {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: 'unsupported key', request: JSON.parse(received) }));
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(upstream.address() as { port: number }).port}/sign`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  it('the body goes from the message and `_meta`; the rest of the upstream answer stays', async () => {
    const sign = defineTool({
      name: 'sign',
      description: 'Signs with the configured key (test).',
      input: {},
      handler: async () => {
        const response = await fetch(url, { method: 'POST', body: JSON.stringify({ signingKey: body }) });
        const text = await response.text();
        const result = fail('unavailable', `signing failed (${response.status}): ${text}`);
        result._meta = { ...result._meta, 'acme/upstream': { body: text } };
        return result;
      },
    });
    const client = await serve([sign], [createRedactErrors()], recordingLogger([]));
    const result = await client.callTool('sign', {});
    const answer = JSON.stringify({ error: 'unsupported key', request: { signingKey: REDACTED } });
    expect(seenEnvelope(result).message).toBe(`signing failed (400): ${answer}`);
    expect(result._meta?.['acme/upstream']).toEqual({ body: answer });
    const seen = JSON.stringify(result);
    for (const line of body.split('\n')) expect(seen).not.toContain(line);
  });
});
