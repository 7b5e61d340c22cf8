import { execFileSync } from 'node:child_process';
import { realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

// A program (or a file) printed as a hex dump: the credential is in the hex columns, and in the text
// column cut every 16 bytes, where neither a known value nor a secret pattern finds it as text.
const PASSWORD = 'hunter2-Zq8x7Lw';
const API_KEY = 'sk-TEST4f9a8b7c6d5e4f3a2b1c';
// Matches no secret pattern: known only as the value of the tool's CARRIER_KEY.
const CARRIER_KEY = 'opaque-9f2c41d7e8';

const dir = scratchDir();
const SECRET_FILE = path.join(dir, 'settings.bin');
const HARMLESS_FILE = path.join(dir, 'notes.bin');

const head = `# orders service settings\n${'\0'.repeat(48)}password=${PASSWORD}\nregion: eu-west-42\napi_key: ${API_KEY}\n`;
// The known value starts 5 bytes before a 16-byte boundary, so xxd's text column cuts it in two.
const keyAt = head.length + 'carrier key '.length;
const padding = '.'.repeat((16 + 11 - (keyAt % 16)) % 16);
const SECRET_TEXT = `${head}carrier key ${padding}${CARRIER_KEY} (rotated monthly)\nend of settings\n`;
const HARMLESS_TEXT = `# notes\nreset your password at the portal; max_tokens: 1500\n${'\0'.repeat(40)}\u00e9t\u00e9 \t tail\n`;

/** Where each secret's bytes are in the file: [start, end). */
const SECRET_RANGES = [PASSWORD, API_KEY, CARRIER_KEY].map((secret): [string, number, number] => {
  const start = Buffer.from(SECRET_TEXT).indexOf(secret);
  return [secret, start, start + secret.length];
});

/**
 * The real program when this machine has it, else a node script printing its format byte for byte
 * (test/fixtures/dump-format.mjs), so every format runs everywhere.
 */
function dumpProgram(name: string, format: string, flags: string[]): { command: string; argv: string[] } {
  let found = '';
  try {
    found = execFileSync('/bin/sh', ['-c', 'command -v "$1"', 'sh', name], { encoding: 'utf8' }).trim();
  } catch {
    // Not installed: the script prints the same.
  }
  if (found.startsWith('/')) return { command: found, argv: flags };
  return { command: NODE, argv: [path.join(path.dirname(ECHO), 'dump-format.mjs'), format] };
}

/** How each format's line says which bytes of the file it shows: its offset, or (none) its bytes found in the file. */
type Offsets = (line: string) => number | undefined;
const hexOffset: Offsets = (line) => {
  const offset = /^([0-9a-f]{8}):? /.exec(line)?.[1];
  return offset === undefined ? undefined : Number.parseInt(offset, 16);
};
const octalOffset: Offsets = (line) => {
  const offset = /^([0-7]{7}) /.exec(line)?.[1];
  return offset === undefined ? undefined : Number.parseInt(offset, 8);
};
const foundBytes: Offsets = (line) => {
  const bytes = Buffer.from(line.replaceAll(' ', ''), 'hex');
  return bytes.length === 0 ? undefined : Buffer.from(SECRET_TEXT).indexOf(bytes);
};

const FORMATS = [
  { tool: 'xxd', program: 'xxd', format: 'xxd', flags: [], width: 16, offsetOf: hexOffset },
  { tool: 'xxd_plain', program: 'xxd', format: 'xxd-plain', flags: ['-p'], width: 30, offsetOf: foundBytes },
  {
    tool: 'hexdump_canonical',
    program: 'hexdump',
    format: 'hexdump-canonical',
    flags: ['-C'],
    width: 16,
    offsetOf: hexOffset,
  },
  { tool: 'od_chars', program: 'od', format: 'od-chars', flags: ['-c'], width: 16, offsetOf: octalOffset },
  {
    tool: 'od_bytes',
    program: 'od',
    format: 'od-bytes-no-offset',
    flags: ['-An', '-tx1'],
    width: 16,
    offsetOf: foundBytes,
  },
] as const;

const FILES = { secret: SECRET_FILE, harmless: HARMLESS_FILE } as const;
const tools = FORMATS.map(({ tool, program, format, flags }) => {
  const { command, argv } = dumpProgram(program, format, [...flags]);
  return {
    tool,
    argv,
    command,
    definition: execTool({
      name: tool,
      description: `Shows a settings file as ${program} ${flags.join(' ')} prints it (test).`,
      input: { file: z.enum(['secret', 'harmless']) },
      command,
      allow: [command, realpathSync(command)],
      cwd: dir,
      env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', CARRIER_KEY },
      args: (input) => [...argv, FILES[input.file]],
    }),
  };
});

let client: TestClient;
beforeAll(async () => {
  writeFileSync(SECRET_FILE, SECRET_TEXT);
  writeFileSync(HARMLESS_FILE, HARMLESS_TEXT);
  client = await serve(
    tools.map(({ definition }) => definition),
    recordingLogger([]),
  );
});
afterAll(async () => client.close());

async function dumpOf(tool: string, file: keyof typeof FILES): Promise<string> {
  const result = await client.callTool(tool, { file });
  expect(result.isError).toBeUndefined();
  const data = parseResultText(result) as { stdout: string; truncated: boolean };
  expect(data.truncated).toBe(false);
  return data.stdout;
}

/** What the program prints, run here directly. */
function printed(tool: string, file: keyof typeof FILES): string {
  const { command, argv } = tools.find((entry) => entry.tool === tool)!;
  return execFileSync(command, [...argv, FILES[file]], { encoding: 'utf8' });
}

describe('a hex dump of a file holding credentials', () => {
  it.each(FORMATS)(
    '$tool: every line holding a byte of a secret is replaced whole, the others stay',
    async ({ tool, width, offsetOf }) => {
      // The known value is cut in two by the dump's 16-byte lines.
      const [, keyStart, keyEnd] = SECRET_RANGES[2]!;
      expect(Math.floor(keyStart / 16)).not.toBe(Math.floor((keyEnd - 1) / 16));
      const raw = printed(tool, 'secret');
      const stdout = await dumpOf(tool, 'secret');
      const rawLines = raw.split('\n');
      const lines = stdout.split('\n');
      for (const line of lines) {
        // Whole lines go: what stays is a line the program printed, hex and text column together.
        if (line !== '[REDACTED]') expect(rawLines).toContain(line);
        const offset = offsetOf(line);
        if (offset === undefined) continue;
        expect(offset, `line ${JSON.stringify(line)} is not in the file`).toBeGreaterThanOrEqual(0);
        // The bytes this line shows hold none of any secret's.
        for (const [secret, start, end] of SECRET_RANGES) {
          expect(
            offset + width <= start || offset >= end,
            `${JSON.stringify(line)} shows part of ${secret}`,
          ).toBe(true);
        }
      }
      // Neither half of a secret's text survives either (the lines that held them are gone).
      for (const [secret] of SECRET_RANGES) {
        for (let at = 0; at + 5 <= secret.length; at += 1)
          expect(stdout).not.toContain(secret.slice(at, at + 5));
      }
      expect(lines).toContain('[REDACTED]');
      // Lines of the file with no secret in them are still shown: the header and the line with `password=`'s key.
      expect(
        lines.filter((line) => line !== '[REDACTED]' && offsetOf(line) !== undefined).length,
      ).toBeGreaterThan(2);
    },
  );

  it.each(FORMATS)(
    '$tool: a dump of a harmless file comes back as the program printed it',
    async ({ tool }) => {
      const raw = printed(tool, 'harmless');
      expect(raw).not.toBe('');
      expect(await dumpOf(tool, 'harmless')).toBe(raw);
    },
  );
});
