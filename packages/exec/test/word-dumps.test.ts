import { execFileSync } from 'node:child_process';
import { realpathSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { scrubOutput } from '../src/environment.js';
import { scrubHexDumps } from '../src/hex-dumps.js';
import { execTool } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

// A file printed as 2-, 4- or 8-byte words (od -x, plain hexdump, xxd -e), octal bytes (od -b) or
// named characters (od -a): the credential is only in words with their bytes swapped, or one character
// a field, where neither a known value nor a secret pattern finds it as text.
const PASSWORD = 'hunter2-Zq8x7Lw';
const API_KEY = 'sk-TEST4f9a8b7c6d5e4f3a2b1c';
// Matches no secret pattern: known only as the value of the tool's CARRIER_KEY.
const CARRIER_KEY = 'opaque-9f2c41d7e8';

const dir = scratchDir();
const SECRET_FILE = path.join(dir, 'settings.bin');
const HARMLESS_FILE = path.join(dir, 'notes.bin');

const head = `# orders service settings\n${'\0'.repeat(48)}password=${PASSWORD}\nregion: eu-west-42\napi_key: ${API_KEY}\n`;
// The known value starts 5 bytes before a 16-byte boundary, so the dump's lines cut it in two.
const keyAt = head.length + 'carrier key '.length;
const padding = '.'.repeat((16 + 11 - (keyAt % 16)) % 16);
// An odd length: the last word is cut short.
const SECRET_TEXT = `${head}carrier key ${padding}${CARRIER_KEY} (rotated monthly)\nend of settings.\n`;
const HARMLESS_TEXT = `# notes\nreset your password at the portal; max_tokens: 1500\n${'\0'.repeat(40)}\u00e9t\u00e9 \t tail\n`;
const SECRET_BYTES = Buffer.from(SECRET_TEXT);

/** Where each secret's bytes are in the file: [start, end). */
const SECRET_RANGES = [PASSWORD, API_KEY, CARRIER_KEY].map((secret): [string, number, number] => {
  const start = SECRET_BYTES.indexOf(secret);
  return [secret, start, start + secret.length];
});

/** The real program when this machine has it, else test/fixtures/dump-format.mjs printing its format. */
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
const offsetIn =
  (pattern: RegExp, radix: number): Offsets =>
  (line) => {
    const offset = pattern.exec(line)?.[1];
    return offset === undefined ? undefined : Number.parseInt(offset, radix);
  };
const octalOffset = offsetIn(/^([0-7]{7}) /, 8);
const hexOffset7 = offsetIn(/^([0-9a-f]{7}) /, 16);
const hexOffset6 = offsetIn(/^([0-9a-f]{6}) /, 16);
const xxdOffset = offsetIn(/^([0-9a-f]{8}): /, 16);
/** `od -An -x`: the line's little-endian words found in the file (the last one may end in a 0 of padding). */
const foundWords: Offsets = (line) => {
  if (!/^ [0-9a-f]{4}/.test(line)) return undefined;
  const words = line.trim().split(/ +/);
  const bytes = Buffer.from(words.map((word) => word.slice(2) + word.slice(0, 2)).join(''), 'hex');
  const at = SECRET_BYTES.indexOf(bytes);
  return at >= 0 || bytes.at(-1) !== 0 ? at : SECRET_BYTES.indexOf(bytes.subarray(0, -1));
};

/**
 * What a format prints for the bytes of a secret, as patterns: each two words in a row (where the
 * file's word boundaries fall, in one line), or its fields for each three bytes in one line; none of
 * it may reach the model.
 */
type Shows = (start: number, end: number) => RegExp[];
const wordsOf =
  (size: number, bigEndian = false, octal = false): Shows =>
  (start, end) => {
    const word = (at: number): string => {
      const bytes = [...SECRET_BYTES.subarray(at, at + size)].map((byte) =>
        byte.toString(16).padStart(2, '0'),
      );
      const hex = (bigEndian ? bytes : bytes.reverse()).join('');
      return octal ? Number.parseInt(hex, 16).toString(8).padStart(6, '0') : hex;
    };
    const shown: RegExp[] = [];
    for (let at = Math.ceil(start / size) * size; at + 2 * size <= end; at += size) {
      if (Math.floor(at / 16) === Math.floor((at + 2 * size - 1) / 16))
        shown.push(new RegExp(`(?<![0-9a-f])${word(at)} +${word(at + size)}(?![0-9a-f])`));
    }
    return shown;
  };
const fieldsOf =
  (field: (byte: number) => string): Shows =>
  (start, end) => {
    const shown: RegExp[] = [];
    for (let at = start; at + 3 <= end; at += 1) {
      if (Math.floor(at / 16) === Math.floor((at + 2) / 16))
        shown.push(new RegExp([...SECRET_BYTES.subarray(at, at + 3)].map(field).join('')));
    }
    return shown;
  };

const FORMATS = [
  {
    tool: 'od_plain',
    program: 'od',
    format: 'od-octal-words',
    flags: [],
    offsetOf: octalOffset,
    shows: wordsOf(2, false, true),
  },
  {
    tool: 'od_words',
    program: 'od',
    format: 'od-words',
    flags: ['-x'],
    offsetOf: octalOffset,
    shows: wordsOf(2),
  },
  {
    tool: 'od_words_hex_offsets',
    program: 'od',
    format: 'od-words-hex-offsets',
    flags: ['-Ax', '-tx2'],
    offsetOf: hexOffset6,
    shows: wordsOf(2),
  },
  {
    tool: 'od_words_no_offset',
    program: 'od',
    format: 'od-words-no-offset',
    flags: ['-An', '-x'],
    offsetOf: foundWords,
    shows: wordsOf(2),
  },
  {
    tool: 'od_words_big_endian',
    program: 'od',
    format: 'od-words-big',
    flags: ['--endian=big', '-x'],
    offsetOf: octalOffset,
    shows: wordsOf(2, true),
  },
  {
    tool: 'od_words4',
    program: 'od',
    format: 'od-words4',
    flags: ['-tx4'],
    offsetOf: octalOffset,
    shows: wordsOf(4),
  },
  {
    tool: 'hexdump',
    program: 'hexdump',
    format: 'hexdump-words',
    flags: [],
    offsetOf: hexOffset7,
    shows: wordsOf(2),
  },
  {
    tool: 'hexdump_x',
    program: 'hexdump',
    format: 'hexdump-x',
    flags: ['-x'],
    offsetOf: hexOffset7,
    shows: wordsOf(2),
  },
  {
    tool: 'xxd_little',
    program: 'xxd',
    format: 'xxd-little',
    flags: ['-e'],
    offsetOf: xxdOffset,
    shows: wordsOf(4),
  },
  {
    tool: 'od_named',
    program: 'od',
    format: 'od-named',
    flags: ['-a'],
    offsetOf: octalOffset,
    shows: fieldsOf((byte) => String.fromCharCode(byte).padStart(4)),
  },
  {
    tool: 'od_octal',
    program: 'od',
    format: 'od-octal',
    flags: ['-b'],
    offsetOf: octalOffset,
    shows: fieldsOf((byte) => ` ${byte.toString(8).padStart(3, '0')}`),
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

describe('a dump of words, octal bytes or named characters of a file holding credentials', () => {
  it.each(FORMATS)(
    '$tool: every line holding a byte of a secret is replaced whole, the others stay; a harmless file is shown as printed',
    async ({ tool, offsetOf, shows }) => {
      const [, keyStart, keyEnd] = SECRET_RANGES[2]!;
      expect(Math.floor(keyStart / 16)).not.toBe(Math.floor((keyEnd - 1) / 16));
      const raw = printed(tool, 'secret');
      const stdout = await dumpOf(tool, 'secret');
      const rawLines = raw.split('\n');
      const lines = stdout.split('\n');
      for (const line of lines) {
        if (line !== '[REDACTED]') expect(rawLines).toContain(line);
        const offset = offsetOf(line);
        if (offset === undefined) continue;
        expect(offset, `line ${JSON.stringify(line)} is not in the file`).toBeGreaterThanOrEqual(0);
        for (const [secret, start, end] of SECRET_RANGES) {
          expect(
            offset + 16 <= start || offset >= end,
            `${JSON.stringify(line)} shows part of ${secret}`,
          ).toBe(true);
        }
      }
      // Neither the secret's words or fields (which the program did print) nor its text survives.
      for (const [secret, start, end] of SECRET_RANGES) {
        const shown = shows(start, end);
        expect(shown.length).toBeGreaterThan(0);
        for (const pattern of shown) {
          expect(raw).toMatch(pattern);
          expect(stdout, `${tool} shows ${pattern} of ${secret}`).not.toMatch(pattern);
        }
        for (let at = 0; at + 5 <= secret.length; at += 1)
          expect(stdout).not.toContain(secret.slice(at, at + 5));
      }
      expect(lines).toContain('[REDACTED]');
      // The header's lines, the `password=` key's and the last ones stay.
      expect(
        lines.filter((line) => line !== '[REDACTED]' && offsetOf(line) !== undefined).length,
      ).toBeGreaterThan(2);
      const harmless = printed(tool, 'harmless');
      expect(harmless).not.toBe('');
      expect(await dumpOf(tool, 'harmless')).toBe(harmless);
    },
  );
});

/** `dump` with its lines at `gone` (one run) replaced by one `[REDACTED]` line. */
function withoutLines(dump: string, gone: readonly number[]): string {
  const lines = dump.split('\n');
  lines.splice(gone[0]!, gone.length, '[REDACTED]');
  return lines.join('\n');
}

// Captured from od (GNU coreutils 9.1), hexdump (util-linux) and xxd (2022-01-14) on x86-64, of
// `# app\n`, ten NULs, `db_password=Xk9-hunter2-Zq8x7Lw\nhost: db.internal\n` (66 bytes): the
// password's value is in the second and third lines of 16 bytes.
const CAPTURED: ReadonlyArray<readonly [string, string]> = [
  [
    'od -x',
    `0000000 2023 7061 0a70 0000 0000 0000 0000 0000
0000020 6264 705f 7361 7773 726f 3d64 6b58 2d39
0000040 7568 746e 7265 2d32 715a 7838 4c37 0a77
0000060 6f68 7473 203a 6264 692e 746e 7265 616e
0000100 0a6c
0000102
`,
  ],
  [
    'od -Ad -tx2',
    `0000000 2023 7061 0a70 0000 0000 0000 0000 0000
0000016 6264 705f 7361 7773 726f 3d64 6b58 2d39
0000032 7568 746e 7265 2d32 715a 7838 4c37 0a77
0000048 6f68 7473 203a 6264 692e 746e 7265 616e
0000064 0a6c
0000066
`,
  ],
  [
    'od -An -x',
    ` 2023 7061 0a70 0000 0000 0000 0000 0000
 6264 705f 7361 7773 726f 3d64 6b58 2d39
 7568 746e 7265 2d32 715a 7838 4c37 0a77
 6f68 7473 203a 6264 692e 746e 7265 616e
 0a6c
`,
  ],
  [
    'hexdump',
    `0000000 2023 7061 0a70 0000 0000 0000 0000 0000
0000010 6264 705f 7361 7773 726f 3d64 6b58 2d39
0000020 7568 746e 7265 2d32 715a 7838 4c37 0a77
0000030 6f68 7473 203a 6264 692e 746e 7265 616e
0000040 0a6c                                   
0000042
`,
  ],
  [
    'hexdump -x',
    `0000000    2023    7061    0a70    0000    0000    0000    0000    0000
0000010    6264    705f    7361    7773    726f    3d64    6b58    2d39
0000020    7568    746e    7265    2d32    715a    7838    4c37    0a77
0000030    6f68    7473    203a    6264    692e    746e    7265    616e
0000040    0a6c                                                        
0000042
`,
  ],
  [
    'xxd -e',
    `00000000: 70612023 00000a70 00000000 00000000  # app...........
00000010: 705f6264 77737361 3d64726f 2d396b58  db_password=Xk9-
00000020: 746e7568 2d327265 7838715a 0a774c37  hunter2-Zq8x7Lw.
00000030: 74736f68 6264203a 746e692e 616e7265  host: db.interna
00000040:     0a6c                             l.
`,
  ],
  [
    'xxd -e -g2',
    `00000000: 2023 7061 0a70 0000 0000 0000 0000 0000  # app...........
00000010: 6264 705f 7361 7773 726f 3d64 6b58 2d39  db_password=Xk9-
00000020: 7568 746e 7265 2d32 715a 7838 4c37 0a77  hunter2-Zq8x7Lw.
00000030: 6f68 7473 203a 6264 692e 746e 7265 616e  host: db.interna
00000040: 0a6c                                     l.
`,
  ],
  [
    'od -tx4',
    `0000000 70612023 00000a70 00000000 00000000
0000020 705f6264 77737361 3d64726f 2d396b58
0000040 746e7568 2d327265 7838715a 0a774c37
0000060 74736f68 6264203a 746e692e 616e7265
0000100 00000a6c
0000102
`,
  ],
  [
    'od -tx2z',
    `0000000 2023 7061 0a70 0000 0000 0000 0000 0000  ># app...........<
0000020 6264 705f 7361 7773 726f 3d64 6b58 2d39  >db_password=Xk9-<
0000040 7568 746e 7265 2d32 715a 7838 4c37 0a77  >hunter2-Zq8x7Lw.<
0000060 6f68 7473 203a 6264 692e 746e 7265 616e  >host: db.interna<
0000100 0a6c                                     >l.<
0000102
`,
  ],
  [
    'od -a',
    `0000000   #  sp   a   p   p  nl nul nul nul nul nul nul nul nul nul nul
0000020   d   b   _   p   a   s   s   w   o   r   d   =   X   k   9   -
0000040   h   u   n   t   e   r   2   -   Z   q   8   x   7   L   w  nl
0000060   h   o   s   t   :  sp   d   b   .   i   n   t   e   r   n   a
0000100   l  nl
0000102
`,
  ],
  [
    'od -An -a',
    `   #  sp   a   p   p  nl nul nul nul nul nul nul nul nul nul nul
   d   b   _   p   a   s   s   w   o   r   d   =   X   k   9   -
   h   u   n   t   e   r   2   -   Z   q   8   x   7   L   w  nl
   h   o   s   t   :  sp   d   b   .   i   n   t   e   r   n   a
   l  nl
`,
  ],
  [
    'od',
    `0000000 020043 070141 005160 000000 000000 000000 000000 000000
0000020 061144 070137 071541 073563 071157 036544 065530 026471
0000040 072550 072156 071145 026462 070532 074070 046067 005167
0000060 067550 072163 020072 061144 064456 072156 071145 060556
0000100 005154
0000102
`,
  ],
  [
    'hexdump -o',
    `0000000  020043  070141  005160  000000  000000  000000  000000  000000
0000010  061144  070137  071541  073563  071157  036544  065530  026471
0000020  072550  072156  071145  026462  070532  074070  046067  005167
0000030  067550  072163  020072  061144  064456  072156  071145  060556
0000040  005154                                                        
0000042
`,
  ],
  [
    'od --endian=big -x',
    `0000000 2320 6170 700a 0000 0000 0000 0000 0000
0000020 6462 5f70 6173 7377 6f72 643d 586b 392d
0000040 6875 6e74 6572 322d 5a71 3878 374c 770a
0000060 686f 7374 3a20 6462 2e69 6e74 6572 6e61
0000100 6c0a
0000102
`,
  ],
];

describe('the dumps as the programs print them (captured)', () => {
  it.each(CAPTURED)(
    '%s: the lines of the password go, found by its key or as a known value',
    (_name, dump) => {
      const scrubbed = withoutLines(dump, [1, 2]);
      expect(scrubHexDumps(dump, [])).toBe(scrubbed);
      expect(scrubHexDumps(dump, ['Xk9-hunter2-Zq8x7Lw'])).toBe(scrubbed);
      // And through the whole output scrubber.
      expect(scrubOutput(dump, [])).toBe(scrubbed);
    },
  );

  it('od -w4 -tx4, od -w2 -x, od -w1 -a: one word or field a line is a dump too', () => {
    const dump = `0000000 70612023
0000004 00000a70
0000010 00000000
*
0000020 705f6264
0000024 77737361
0000030 3d64726f
0000034 2d396b58
0000040 746e7568
0000044 2d327265
0000050 7838715a
0000054 0a774c37
0000060 74736f68
0000064 6264203a
0000070 746e692e
0000074 616e7265
0000100 00000a6c
0000102
`;
    expect(scrubHexDumps(dump, [])).toBe(withoutLines(dump, [7, 8, 9, 10, 11]));
    const words = `0000000 2023
0000002 7061
0000004 0a70
0000006 0000
*
0000020 6264
0000022 705f
0000024 7361
0000026 7773
0000030 726f
0000032 3d64
0000034 6b58
0000036 2d39
0000040 7568
`;
    expect(scrubHexDumps(words, [])).toBe(withoutLines(words, [11, 12, 13]));
    // od -w1 -a: one named character a line.
    const fields = `0000020   d
0000021   b
0000022   _
0000023   p
0000024   a
0000025   s
0000026   s
0000027   w
0000030   o
0000031   r
0000032   d
0000033   =
0000034   X
0000035   k
0000036   9
0000037   -
0000040   h
0000041   u
`;
    expect(scrubHexDumps(fields, [])).toBe(withoutLines(fields, [12, 13, 14, 15, 16, 17]));
  });

  it('xxd -e: lines whose text column reads the same both ways (all dots) are read little-endian once a later line shows the order', () => {
    // Eight `é` (c3 a9), NULs, `user=app\n`: the first line shows only dots, as plain xxd's would.
    const dump = `00000000: a9c3a9c3 a9c3a9c3 a9c3a9c3 a9c3a9c3  ................
00000010: 00000000 00000000 00000000 00000000  ................
00000020: 00000000 72657375 7070613d       0a  ....user=app.
`;
    expect(scrubHexDumps(dump, ['\u00e9'.repeat(8)])).toBe(withoutLines(dump, [0]));
    // Plain xxd of the same bytes: big-endian as before.
    const plain = `00000000: c3a9c3a9 c3a9c3a9 c3a9c3a9 c3a9c3a9  ................
00000010: 00000000 00000000 00000000 00000000  ................
00000020: 00000000 75736572 3d617070 0a        ....user=app.
`;
    expect(scrubHexDumps(plain, ['\u00e9'.repeat(8)])).toBe(withoutLines(plain, [0]));
  });
});

const OD_X = CAPTURED[0]![1];
const OD_X_SCRUBBED = withoutLines(OD_X, [1, 2]);

// Output with columns of 4 hex digits that is no dump: read as words where it looks like them, it
// decodes to no secret, and comes back as it was, next to a dump whose password's lines go.
const NOT_DUMPS: ReadonlyArray<readonly [string, string]> = [
  [
    'a table of UUID parts',
    'time_low time_mid version variant node\n550e8400 e29b 41d4 a716 446655440000\n6ba7b810 9dad 11d1 80b4 00c04fd430c8\n',
  ],
  ['a list of ports', '8080 8443 9000 9443\n3000 3001 5432 6379\n'],
  [
    'git log --oneline',
    '3b8d9a9 audit README: a second run\nebe83c5 fix: add cafe beef\na1b2c3d dead beef cafe babe\n7f3a2c0 bump 1234 5678\n',
  ],
  [
    'IPv6 addresses',
    '2001:db8:85a3::8a2e:370:7334\nfe80::1%eth0\n2001:0db8:85a3:0000:0000:8a2e:0370:7334 dev eth0 metric 256\n',
  ],
  [
    'a memory map',
    '55d0c8a4e000-55d0c8a50000 r--p 00000000 08:01 1234567 /usr/bin/cat\n7f3a2c000000-7f3a2c021000 rw-p 00000000 00:00 0\n',
  ],
  [
    'sha256sum',
    'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  cafe\n5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  beef dead\n',
  ],
  ['ps', '  PID  PPID CMD\n 1234  5678 node server.js\n 4321  8765 od -x\n'],
  [
    'git ls-tree (file modes)',
    '100644 blob e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\tREADME.md\n040000 tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\tsrc\n',
  ],
  ['octal permissions', '100644 100755 120000\n040755 100600\n'],
  ['columns of sizes', '  1024  2048  4096\n  8192 16384 32768\n'],
  ['an xxd -e line whose column shows neither order', '00000000: 73736170 64726f77  hello, w\n'],
  ['a word list that names bytes', ' nul  del  soh\n  nl  sp  cr\n'],
];

describe('output that only looks like words', () => {
  it.each(NOT_DUMPS)('%s: comes back as it was, and so does it next to a dump of a secret', (_name, text) => {
    expect(scrubHexDumps(text, [PASSWORD, CARRIER_KEY])).toBe(text);
    // Before a dump (which starts again at offset 0) and after one: only the dump's lines go.
    expect(scrubHexDumps(`${text}${OD_X}`, [PASSWORD])).toBe(`${text}${OD_X_SCRUBBED}`);
    expect(scrubHexDumps(`${OD_X}${text}`, [PASSWORD])).toBe(`${OD_X_SCRUBBED}${text}`);
  });
});

describe('hostile inputs shaped like the new formats (each line read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  it.each([
    ['one line of words', `0000000${repeat(' 6170')}\n`],
    ['lines of words', repeat('0000000 6170 7373\n')],
    ['spaces before a word', `${' '.repeat(size)}6170 7373\n`],
    ['words of two widths', `0000000${repeat(' 6170 61706170')}\n`],
    ['words a space too far apart', `0000000${repeat('     6170')}\n`],
    ['xxd -e groups with no text column', `00000000: ${repeat('73736170 ')}\n`],
    ['an xxd -e group cut short after spaces', `00000000: ${' '.repeat(size)}0a  .\n`],
    [
      'xxd -e groups with a column one character short',
      `00000000: ${repeat('73736170 ')} ${repeat('pass')}\n`,
    ],
    ['od -a names', `0000000${repeat(' nul')}\n`],
    ['od -a names, not one a byte', repeat('  nx')],
    ['lines of spaces and digits', repeat('    \n 1234\n')],
  ])('%s', (_name, text) => {
    expect(scrubHexDumps(`${text}${OD_X}`, [PASSWORD])).toBe(`${text}${OD_X_SCRUBBED}`);
  });
});
