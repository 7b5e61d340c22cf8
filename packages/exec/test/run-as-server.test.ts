// The hole runAs closes. A program runs as the server's user, so it may open the server's own
// descriptors through /proc: `/proc/<server pid>/fd/1` is the stdio transport's stdout, the client's
// stream, and `/proc/<server pid>/fd/N` the audit log the server holds open. A program that writes to
// a path the model picks (`cp` here) then forges JSON-RPC messages to the client or rewrites the log.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  closeSync,
  constants,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { Socket } from 'node:net';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, JSONRPCMessage, Notification } from '@modelcontextprotocol/sdk/types.js';
import { expectFailure, parseResultText } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import type { RunAs } from '../src/index.js';
import {
  CANNOT_SWITCH_USERS,
  compiledFixture,
  NOBODY,
  reportCannotRun,
  scratchDir,
  until,
} from './harness.js';

const SERVER = compiledFixture('copy-file-server.ts');
const FORGED = '{"jsonrpc":"2.0","method":"notifications/forged","params":{"by":"the program"}}\n';
const AUDIT_LINE = '{"tool":"save_copy","outcome":"ok"}\n';

const cannotSwitch = CANNOT_SWITCH_USERS;
if (cannotSwitch !== undefined) {
  describe("the server's descriptors through /proc", () => {
    reportCannotRun("runAs: the program as nobody kept from the server's /proc/<pid>/fd", cannotSwitch);
  });
} else {
  // Readable by nobody: the copy itself must work, so a refusal is about the destination alone.
  const dir = scratchDir();
  chmodSync(dir, 0o755);
  const source = path.join(dir, 'template.jsonl');
  writeFileSync(source, FORGED);
  chmodSync(source, 0o644);
  const writable = path.join(dir, 'writable');
  mkdirSync(writable);
  chmodSync(writable, 0o777);

  /**
   * A stdio transport whose server writes to a FIFO: a pipe, as a shell or most clients' subprocess
   * libraries give a stdio server. (Node's spawn gives a socket pair, which open() through /proc
   * refuses with ENXIO; a pipe it opens.)
   */
  class FifoStdioTransport implements Transport {
    onclose?: () => void;
    onerror?: (error: Error) => void;
    onmessage?: (message: JSONRPCMessage) => void;
    readonly #buffer = new ReadBuffer();
    readonly #stdout: Socket;
    readonly child: ChildProcess;
    readonly exited: Promise<void>;

    constructor(fifo: string, env: Record<string, string>) {
      const made = spawnSync('/usr/bin/mkfifo', [fifo]);
      if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr}`);
      // The read end first, without waiting for a writer; then the write end the server gets.
      const readEnd = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
      const writeEnd = openSync(fifo, constants.O_WRONLY);
      this.child = spawn(process.execPath, [SERVER], {
        env,
        stdio: ['pipe', writeEnd, 'ignore'],
      });
      closeSync(writeEnd);
      this.#stdout = new Socket({ fd: readEnd, readable: true, writable: false });
      this.exited = new Promise((done) => this.child.once('exit', () => done()));
    }

    async start(): Promise<void> {
      this.#stdout.on('data', (chunk: Buffer) => {
        this.#buffer.append(chunk);
        for (
          let message = this.#buffer.readMessage();
          message !== null;
          message = this.#buffer.readMessage()
        ) {
          this.onmessage?.(message);
        }
      });
      this.child.on('error', (error) => this.onerror?.(error));
      this.child.stdin?.on('error', () => undefined);
    }

    async send(message: JSONRPCMessage): Promise<void> {
      this.child.stdin?.write(serializeMessage(message));
    }

    async close(): Promise<void> {
      this.child.stdin?.end();
      await this.exited;
      this.#stdout.destroy();
      this.onclose?.();
    }
  }

  interface Started {
    client: Client;
    pid: number;
    auditLog: string;
    auditFd: string;
    forged: Notification[];
  }
  let started: Started | undefined;
  afterEach(async () => {
    await started?.client.close();
    started = undefined;
  });

  let servers = 0;
  async function start(runAs?: RunAs): Promise<Started> {
    servers += 1;
    const auditLog = path.join(dir, `audit-${servers}.jsonl`);
    writeFileSync(auditLog, AUDIT_LINE);
    const transport = new FifoStdioTransport(path.join(dir, `stdout-${servers}.fifo`), {
      PATH: '/usr/bin:/bin',
      COPY_SOURCE: source,
      AUDIT_LOG: auditLog,
      ...(runAs === undefined ? {} : { RUN_AS: `${runAs.uid}:${runAs.gid}` }),
    });
    const client = new Client({ name: 'run-as-server-test', version: '1.0.0' });
    const forged: Notification[] = [];
    // What the server never sends: any notification the client does not know arrives here.
    client.fallbackNotificationHandler = async (notification) => {
      forged.push(notification);
    };
    await client.connect(transport);
    const pid = transport.child.pid;
    if (pid === undefined) throw new Error('the server did not start');
    const auditFd = readdirSync(`/proc/${pid}/fd`).find((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === auditLog;
      } catch {
        return false;
      }
    });
    if (auditFd === undefined) throw new Error('the server does not hold its audit log open');
    started = { client, pid, auditLog, auditFd, forged };
    return started;
  }

  const saveCopy = async (client: Client, to: string): Promise<CallToolResult> =>
    (await client.callTool({ name: 'save_copy', arguments: { to } })) as CallToolResult;

  describe("the server's descriptors through /proc", () => {
    it("without runAs (the hole): the program writes a forged message into the client's stream and over the audit log", async () => {
      const { client, pid, auditLog, auditFd, forged } = await start();
      const toStream = await saveCopy(client, `/proc/${pid}/fd/1`);
      expect(toStream.isError).toBeUndefined();
      await until(() => forged.length > 0, 'the forged notification');
      expect(forged).toEqual([
        { jsonrpc: '2.0', method: 'notifications/forged', params: { by: 'the program' } },
      ]);

      const toLog = await saveCopy(client, `/proc/${pid}/fd/${auditFd}`);
      expect(toLog.isError).toBeUndefined();
      expect(readFileSync(auditLog, 'utf8')).toBe(FORGED);
    });

    it('with runAs nobody: both writes are refused (permission denied) and nothing reaches the stream or the log', async () => {
      const { client, pid, auditLog, auditFd, forged } = await start(NOBODY);
      for (const to of [`/proc/${pid}/fd/1`, `/proc/${pid}/fd/${auditFd}`]) {
        const failure = expectFailure(await saveCopy(client, to));
        expect(failure.error).toBe('unavailable');
        expect(failure.message).toBe(
          `The program exited with code 1. stderr (last 2048 bytes): /usr/bin/cp: cannot stat '${to}': Permission denied`,
        );
      }
      expect(readFileSync(auditLog, 'utf8')).toBe(AUDIT_LINE);

      // The same program as nobody copies where nobody may write: the refusal was the destination's.
      const copy = path.join(writable, 'copy.jsonl');
      const saved = await saveCopy(client, copy);
      expect(parseResultText(saved)).toEqual({
        ok: true,
        exitCode: 0,
        stdout: '',
        stderr: '',
        truncated: false,
      });
      expect(readFileSync(copy, 'utf8')).toBe(FORGED);
      // The stream is ordered: a line the refused calls had written would have arrived before this answer.
      expect(forged).toEqual([]);
    });
  });
}
