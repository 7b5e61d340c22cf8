import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { scrubOutput } from '../src/environment.js';
import { scrubHexDumps } from '../src/hex-dumps.js';
import { execTool } from '../src/index.js';
import { scratchDir, serve } from './harness.js';

// A file printed as bits (xxd -b), as a C include (xxd -i) or as decimal bytes (od -tu1, od -td1):
// the credential is only in numbers, where neither a known value nor a secret pattern finds it.
const PASSWORD = 'hunter2-Zq8x7Lw';
// Matches no secret pattern: known only as the value of the tool's CARRIER_KEY.
const CARRIER_KEY = 'Zq7vLw93KpXa1RtY';

const dir = scratchDir();
const SECRET_FILE = path.join(dir, 'settings.bin');
const HARMLESS_FILE = path.join(dir, 'notes.bin');
// Every line of every format shows bytes found once in the file (no two rows alike), so a line's
// bytes say where it is; non-ASCII bytes (od -td1 prints them negative) in both files.
const SECRET_TEXT = `# orders service settings v3\n\u00e9t\u00e9 password=${PASSWORD}\nregion: eu-west-42\ncarrier key ${CARRIER_KEY} (rotated monthly)\nend of settings.\n`;
const HARMLESS_TEXT = `# notes\nreset your password at the portal; max_tokens: 1500\n\u00e9t\u00e9 \t tail 0123456789\n`;
const SECRET_BYTES = Buffer.from(SECRET_TEXT);

/** Where each secret's bytes are in the file: [start, end). */
const SECRET_RANGES = [PASSWORD, CARRIER_KEY].map((secret): [string, number, number] => {
  const start = SECRET_BYTES.indexOf(secret);
  return [secret, start, start + secret.length];
});

/** The bytes one line of each format shows (undefined: a line that shows none: a header, an offset). */
type Decode = (line: string) => Buffer | undefined;
const bitsOf: Decode = (line) => {
  const groups = /^[0-9a-f]{8}: ((?:[01]{8,} ?)+)/.exec(line)?.[1];
  if (groups === undefined) return undefined;
  const bits = groups.replaceAll(' ', '');
  return Buffer.from(bits.match(/[01]{8}/g)!.map((byte) => Number.parseInt(byte, 2)));
};
const cBytesOf: Decode = (line) => {
  const bytes = line.match(/0x[0-9a-f]{2}/gi);
  return bytes === null ? undefined : Buffer.from(bytes.map((byte) => Number.parseInt(byte, 16)));
};
const decimalsOf =
  (offset: boolean): Decode =>
  (line) => {
    const fields = line
      .replace(/ *>.*<$/, '')
      .trim()
      .split(/ +/);
    if (offset) fields.shift();
    if (fields.length === 0 || fields[0] === '') return undefined;
    return Buffer.from(fields.map((field) => Number(field) & 0xff));
  };

const FORMATS = [
  { tool: 'xxd_bits', program: '/usr/bin/xxd', flags: ['-b'], decode: bitsOf },
  { tool: 'xxd_bits_c8_g2', program: '/usr/bin/xxd', flags: ['-b', '-c', '8', '-g', '2'], decode: bitsOf },
  { tool: 'xxd_include', program: '/usr/bin/xxd', flags: ['-i'], decode: cBytesOf },
  { tool: 'xxd_include_upper_c8', program: '/usr/bin/xxd', flags: ['-i', '-u', '-c', '8'], decode: cBytesOf },
  { tool: 'od_unsigned', program: '/usr/bin/od', flags: ['-tu1'], decode: decimalsOf(true) },
  { tool: 'od_signed', program: '/usr/bin/od', flags: ['-td1'], decode: decimalsOf(true) },
  {
    tool: 'od_unsigned_no_offset',
    program: '/usr/bin/od',
    flags: ['-An', '-tu1'],
    decode: decimalsOf(false),
  },
  {
    tool: 'od_signed_hex_offset_z',
    program: '/usr/bin/od',
    flags: ['-Ax', '-td1z'],
    decode: decimalsOf(true),
  },
  {
    tool: 'od_unsigned_w10',
    program: '/usr/bin/od',
    flags: ['-Ad', '-tu1', '-w10'],
    decode: decimalsOf(true),
  },
] as const;

const FILES = { secret: SECRET_FILE, harmless: HARMLESS_FILE } as const;
const tools = FORMATS.map(({ tool, program, flags }) =>
  execTool({
    name: tool,
    description: `Shows a settings file as ${program} ${flags.join(' ')} prints it (test).`,
    input: { file: z.enum(['secret', 'harmless']) },
    command: program,
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', CARRIER_KEY },
    args: (input) => [...flags, FILES[input.file]],
  }),
);

let client: TestClient;
beforeAll(async () => {
  writeFileSync(SECRET_FILE, SECRET_TEXT);
  writeFileSync(HARMLESS_FILE, HARMLESS_TEXT);
  client = await serve(tools, recordingLogger([]));
});
afterAll(async () => client.close());

async function dumpOf(tool: string, file: keyof typeof FILES): Promise<string> {
  const result = await client.callTool(tool, { file });
  expect(result.isError).toBeUndefined();
  const data = parseResultText(result) as { stdout: string; truncated: boolean };
  expect(data.truncated).toBe(false);
  return data.stdout;
}

describe('a dump of bits, C bytes or decimal bytes of a file holding credentials (real xxd and od)', () => {
  it.each(FORMATS)(
    '$tool: every line holding a byte of a secret is replaced whole, the others stay; a harmless file is shown as printed',
    async ({ tool, program, flags, decode }) => {
      const raw = execFileSync(program, [...flags, SECRET_FILE], { encoding: 'utf8' });
      const stdout = await dumpOf(tool, 'secret');
      const rawLines = raw.split('\n');
      // The program did print the secrets' bytes.
      const printed = Buffer.concat(rawLines.map((line) => decode(line) ?? Buffer.alloc(0)));
      for (const [secret] of SECRET_RANGES) expect(printed.includes(secret)).toBe(true);
      const lines = stdout.split('\n');
      expect(lines).toContain('[REDACTED]');
      let kept = 0;
      for (const line of lines) {
        if (line === '[REDACTED]') continue;
        expect(rawLines).toContain(line);
        const bytes = decode(line);
        if (bytes === undefined || bytes.length === 0) continue;
        const at = SECRET_BYTES.indexOf(bytes);
        expect(at, `line ${JSON.stringify(line)} is not in the file`).toBeGreaterThanOrEqual(0);
        for (const [secret, start, end] of SECRET_RANGES) {
          expect(
            at + bytes.length <= start || at >= end,
            `${JSON.stringify(line)} shows part of ${secret}`,
          ).toBe(true);
        }
        kept += 1;
      }
      // The header's lines, the `password=` key's and the last ones stay.
      expect(kept).toBeGreaterThan(2);
      const harmless = execFileSync(program, [...flags, HARMLESS_FILE], { encoding: 'utf8' });
      expect(await dumpOf(tool, 'harmless')).toBe(harmless);
    },
  );
});

// basenc's bits run on across lines (76 a line by default), a byte's bits often split by a line break.
const BASENC = [['--base2msbf'], ['--base2lsbf'], ['--base2msbf', '-w', '20']] as const;
const basencTools = BASENC.map((flags, index) =>
  execTool({
    name: `basenc_${index}`,
    description: `Shows a settings file as basenc ${flags.join(' ')} prints it (test).`,
    input: { file: z.enum(['secret', 'harmless']) },
    command: '/usr/bin/basenc',
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', CARRIER_KEY },
    args: (input) => [...flags, FILES[input.file]],
  }),
);
let basencClient: TestClient;
beforeAll(async () => {
  basencClient = await serve(basencTools, recordingLogger([]));
});
afterAll(async () => basencClient.close());

describe('a file printed as bits by basenc (real basenc)', () => {
  it.each(BASENC.map((flags, index) => [flags.join(' '), index] as const))(
    '%s: every line holding a bit of a secret is replaced, the others stay; a harmless file is shown as printed',
    async (_name, index) => {
      const flags = BASENC[index]!;
      const raw = execFileSync('/usr/bin/basenc', [...flags, SECRET_FILE], { encoding: 'utf8' });
      const rawLines = raw.split('\n');
      const result = await basencClient.callTool(`basenc_${index}`, { file: 'secret' });
      expect(result.isError).toBeUndefined();
      const { stdout } = parseResultText(result) as { stdout: string };
      const lines = stdout.split('\n');
      expect(lines).toContain('[REDACTED]');
      let kept = 0;
      for (const line of lines) {
        if (line === '[REDACTED]' || line === '') continue;
        // Each line's bits, from its place in what basenc printed: no byte of a secret among them.
        const at = rawLines.indexOf(line);
        expect(at).toBeGreaterThanOrEqual(0);
        const firstBit = rawLines.slice(0, at).join('').length;
        const first = Math.floor(firstBit / 8);
        const last = Math.floor((firstBit + line.length - 1) / 8);
        for (const [secret, start, end] of SECRET_RANGES) {
          expect(last < start || first >= end, `${line} holds bits of ${secret}`).toBe(true);
        }
        kept += 1;
      }
      expect(kept).toBeGreaterThan(2);
      const harmless = execFileSync('/usr/bin/basenc', [...flags, HARMLESS_FILE], { encoding: 'utf8' });
      const shown = await basencClient.callTool(`basenc_${index}`, { file: 'harmless' });
      expect(parseResultText(shown)).toMatchObject({ stdout: harmless });
    },
  );
});

// od and hexdump print a row equal to the one before it as `*`: one a byte with `-w1`, so each doubled
// character (`ss`, `99`) of a secret was read once, and `password` no longer read as a key.
const DOUBLED_FILE = path.join(dir, 'doubled.bin');
const DOUBLED_VALUE = 'Xk99-hunnter22';
const DOUBLED_TEXT = `# app\ndb_password=${DOUBLED_VALUE}\nhost: db.internal\n`;
const STARRED = [
  { name: 'od -c -w1', flags: ['-c', '-w1'], radix: 8, width: 1 },
  { name: 'od -a -w1', flags: ['-a', '-w1'], radix: 8, width: 1 },
  { name: 'od -tu1 -w1', flags: ['-tu1', '-w1'], radix: 8, width: 1 },
  { name: 'od -tx1 -w1', flags: ['-tx1', '-w1'], radix: 8, width: 1 },
  { name: 'od -Ad -tu1 -w1', flags: ['-Ad', '-tu1', '-w1'], radix: 10, width: 1 },
  { name: 'od -Ax -td1 -w1', flags: ['-Ax', '-td1', '-w1'], radix: 16, width: 1 },
] as const;
const starredTools = STARRED.map(({ flags }, index) =>
  execTool({
    name: `starred_${index}`,
    description: `Shows a settings file as od ${flags.join(' ')} prints it (test).`,
    input: {},
    command: '/usr/bin/od',
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', CARRIER_KEY },
    args: () => [...flags, DOUBLED_FILE],
  }),
);
let starredClient: TestClient;
beforeAll(async () => {
  writeFileSync(DOUBLED_FILE, DOUBLED_TEXT);
  starredClient = await serve(starredTools, recordingLogger([]));
});
afterAll(async () => starredClient.close());

/** Which lines of `raw` the scrubbed dump kept (each run it replaced is one `[REDACTED]` line). */
function keptLines(raw: readonly string[], scrubbed: readonly string[]): number[] {
  const kept: number[] = [];
  let at = 0;
  for (let index = 0; index < scrubbed.length; index += 1) {
    if (scrubbed[index] === '[REDACTED]') {
      // Up to the next kept line and the one after it, as printed.
      at += 1;
      while (at < raw.length && (raw[at] !== scrubbed[index + 1] || raw[at + 1] !== scrubbed[index + 2]))
        at += 1;
      continue;
    }
    expect(raw[at]).toBe(scrubbed[index]);
    kept.push(at);
    at += 1;
  }
  return kept;
}

describe('rows od leaves out as `*` (with -w1, a doubled character)', () => {
  it.each(STARRED.map((format, index) => [format.name, index] as const))(
    '%s: the rows are put back, so the password is found and no line or `*` of it stays',
    async (_name, index) => {
      const { flags, radix, width } = STARRED[index]!;
      const raw = execFileSync('/usr/bin/od', [...flags, DOUBLED_FILE], { encoding: 'utf8' }).split('\n');
      expect(raw).toContain('*');
      const result = await starredClient.callTool(`starred_${index}`, {});
      expect(result.isError).toBeUndefined();
      const scrubbed = (parseResultText(result) as { stdout: string }).stdout.split('\n');
      expect(scrubbed).toContain('[REDACTED]');
      const offset = (line: string): number => Number.parseInt(line.split(' ')[0]!, radix);
      const start = Buffer.from(DOUBLED_TEXT).indexOf(DOUBLED_VALUE);
      const end = start + DOUBLED_VALUE.length;
      for (const line of keptLines(raw, scrubbed)) {
        if (raw[line] === '') continue;
        const [from, to] =
          raw[line] === '*'
            ? [offset(raw[line - 1]!) + width, offset(raw[line + 1]!)]
            : [offset(raw[line]!), offset(raw[line]!) + width];
        expect(
          to <= start || from >= end,
          `${raw[line]} (bytes ${from} to ${to}) shows part of the password`,
        ).toBe(true);
      }
    },
  );

  it('a `*` before the offset that ends the dump is put back too', () => {
    // od -c -w1 of `aa-pass\nword=Zq8x7Lw\n\n`: the second `a`, `s` and `\n` are `*` lines.
    const dump = `0000000   a
*
0000002   -
0000003   p
0000004   a
0000005   s
*
0000007  \\n
0000010   w
0000011   o
0000012   r
0000013   d
0000014   =
0000015   Z
0000016   q
0000017   8
0000020   x
0000021   7
0000022   L
0000023   w
0000024  \\n
*
0000026
`;
    // A known value ending in both line breaks: found only with the last `*`'s row put back.
    expect(scrubHexDumps(dump, ['Zq8x7Lw\n\n'])).toBe(
      withoutLines(dump, [13, 14, 15, 16, 17, 18, 19, 20, 21]),
    );
    // `*` lines whose rows hold no secret stay.
    expect(scrubHexDumps(dump, ['Zq8x7Lw\n\n']).split('\n').slice(0, 7)).toEqual(
      dump.split('\n').slice(0, 7),
    );
  });
});

/** `dump` with its lines at `gone` (one run) replaced by one `[REDACTED]` line. */
function withoutLines(dump: string, gone: readonly number[]): string {
  const lines = dump.split('\n');
  lines.splice(gone[0]!, gone.length, '[REDACTED]');
  return lines.join('\n');
}

// Captured from xxd (2022-01-14) and od (GNU coreutils 9.1) on x86-64 of `# app\n`, ten NULs,
// `db_password=Xk9-hunter2-Zq8x7Lw\nhost: db.internal\n` and `é\xff` (69 bytes).
const CAPTURED: ReadonlyArray<readonly [string, string, readonly number[]]> = [
  [
    'xxd -b',
    `00000000: 00100011 00100000 01100001 01110000 01110000 00001010  # app.
00000006: 00000000 00000000 00000000 00000000 00000000 00000000  ......
0000000c: 00000000 00000000 00000000 00000000 01100100 01100010  ....db
00000012: 01011111 01110000 01100001 01110011 01110011 01110111  _passw
00000018: 01101111 01110010 01100100 00111101 01011000 01101011  ord=Xk
0000001e: 00111001 00101101 01101000 01110101 01101110 01110100  9-hunt
00000024: 01100101 01110010 00110010 00101101 01011010 01110001  er2-Zq
0000002a: 00111000 01111000 00110111 01001100 01110111 00001010  8x7Lw.
00000030: 01101000 01101111 01110011 01110100 00111010 00100000  host: 
00000036: 01100100 01100010 00101110 01101001 01101110 01110100  db.int
0000003c: 01100101 01110010 01101110 01100001 01101100 00001010  ernal.
00000042: 11000011 10101001 11111111                             ...
`,
    [4, 5, 6, 7],
  ],
  [
    'xxd -i',
    `unsigned char app_bin[] = {
  0x23, 0x20, 0x61, 0x70, 0x70, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x00, 0x00, 0x00, 0x00, 0x64, 0x62, 0x5f, 0x70, 0x61, 0x73, 0x73, 0x77,
  0x6f, 0x72, 0x64, 0x3d, 0x58, 0x6b, 0x39, 0x2d, 0x68, 0x75, 0x6e, 0x74,
  0x65, 0x72, 0x32, 0x2d, 0x5a, 0x71, 0x38, 0x78, 0x37, 0x4c, 0x77, 0x0a,
  0x68, 0x6f, 0x73, 0x74, 0x3a, 0x20, 0x64, 0x62, 0x2e, 0x69, 0x6e, 0x74,
  0x65, 0x72, 0x6e, 0x61, 0x6c, 0x0a, 0xc3, 0xa9, 0xff
};
unsigned int app_bin_len = 69;
`,
    [3, 4],
  ],
  [
    'od -tu1',
    `0000000  35  32  97 112 112  10   0   0   0   0   0   0   0   0   0   0
0000020 100  98  95 112  97 115 115 119 111 114 100  61  88 107  57  45
0000040 104 117 110 116 101 114  50  45  90 113  56 120  55  76 119  10
0000060 104 111 115 116  58  32 100  98  46 105 110 116 101 114 110  97
0000100 108  10 195 169 255
0000105
`,
    [1, 2],
  ],
  [
    'od -td1',
    `0000000   35   32   97  112  112   10    0    0    0    0    0    0    0    0    0    0
0000020  100   98   95  112   97  115  115  119  111  114  100   61   88  107   57   45
0000040  104  117  110  116  101  114   50   45   90  113   56  120   55   76  119   10
0000060  104  111  115  116   58   32  100   98   46  105  110  116  101  114  110   97
0000100  108   10  -61  -87   -1
0000105
`,
    [1, 2],
  ],
  [
    'od -An -tu1z',
    `  35  32  97 112 112  10   0   0   0   0   0   0   0   0   0   0  ># app...........<
 100  98  95 112  97 115 115 119 111 114 100  61  88 107  57  45  >db_password=Xk9-<
 104 117 110 116 101 114  50  45  90 113  56 120  55  76 119  10  >hunter2-Zq8x7Lw.<
 104 111 115 116  58  32 100  98  46 105 110 116 101 114 110  97  >host: db.interna<
 108  10 195 169 255                                              >l....<
`,
    [1, 2],
  ],
];

describe('the dumps as the programs print them (captured)', () => {
  it.each(CAPTURED)(
    '%s: the lines of the password go, found by its key or as a known value',
    (_name, dump, gone) => {
      const scrubbed = withoutLines(dump, gone);
      expect(scrubHexDumps(dump, [])).toBe(scrubbed);
      expect(scrubHexDumps(dump, ['Xk9-hunter2-Zq8x7Lw'])).toBe(scrubbed);
      expect(scrubOutput(dump, [])).toBe(scrubbed);
    },
  );
});

const OD_TU1 = CAPTURED[2]![1];
const OD_TU1_SCRUBBED = withoutLines(OD_TU1, [1, 2]);

// Output of numbers that is no dump (or a dump of nothing secret): it comes back as it was, alone and
// next to a dump whose password's lines go.
const NOT_DUMPS: ReadonlyArray<readonly [string, string]> = [
  ['a list of small numbers', '  1   2   3\n  4   5   6\n 10  20  30\n'],
  ['right-aligned counts', '   7 apples\n  12 pears\n 100 plums\n'],
  ['wc', '  12  40 310 notes.txt\n   3   9  71 todo.txt\n  15  49 381 total\n'],
  ['seq -w', '001\n002\n003\n010\n'],
  ['CSV of bytes', '112,97,115,115,119,111,114,100\n61,104,117,110,116,101,114,50\n'],
  [
    'a C array of ints',
    'static const uint8_t lut[] = {\n  0x01, 0x02, 0x04, 0x08,\n  0x10, 0x20, 0x40, 0x80\n};\n',
  ],
  ['a C array of wider ints', 'int masks[] = { 0x00ff, 0xff00 };\n  0x1234, 0x5678,\n'],
  ['hex constants in prose', 'flags 0x01 and 0x02 are set\n0x7f is DEL\n'],
  [
    'ls -l',
    'total 12\n-rw-r--r-- 1 app app  220 Dec  7 14:01 .bashrc\ndrwxr-xr-x 2 app app 4096 Dec  7 14:01 bin\n',
  ],
  [
    'df',
    'Filesystem     1K-blocks    Used Available Use% Mounted on\n/dev/sda1       41152736 9807284  29232092  26% /\n',
  ],
  ['od -b (octal bytes)', '0000000 043 040 141 160 160 012\n0000006\n'],
  ['od -c with digits', '0000000   1   2   3  \\n\n0000004\n'],
  ['binary strings in a table', 'mask 11110000 00001111\nflag 00000001\n'],
  ['an xxd -b line of harmless text', '00000000: 01101000 01101001 00001010                    hi.\n'],
  ['bits of harmless text (basenc)', '0110100001101001000010100110100001101001\n00001010\n'],
  ['xxd -p of zeros and ones', '0000000000000000000000000000\n1111111111111111\n0101010101\n'],
  ['a table of bytes two spaces apart', ' 104 105  10\n  72  73  10\n'],
];

describe('output of numbers that is no dump of a secret', () => {
  it.each(NOT_DUMPS)('%s: comes back as it was, and so does it next to a dump of a secret', (_name, text) => {
    expect(scrubHexDumps(text, [PASSWORD, CARRIER_KEY])).toBe(text);
    expect(scrubOutput(text, [PASSWORD, CARRIER_KEY])).toBe(text);
    expect(scrubHexDumps(`${text}${OD_TU1}`, [PASSWORD])).toBe(`${text}${OD_TU1_SCRUBBED}`);
    expect(scrubHexDumps(`${OD_TU1}${text}`, [PASSWORD])).toBe(`${OD_TU1_SCRUBBED}${text}`);
  });
});

describe('hostile inputs shaped like the new formats (each line read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  it.each([
    ['one line of bits', `00000000: ${repeat('01110000 ')}\n`],
    ['bits with a column one character short', `00000000: ${repeat('01110000 ')} ${repeat('p')}\n`],
    ['one line of C bytes', `${repeat('0x70, ')}\n`],
    ['C bytes that end badly', `${repeat('0x70, ')}0x7\n`],
    ['lines of C bytes', repeat('  0x70, 0x61,\n')],
    ['one line of decimal bytes', `0000000${repeat(' 112')}\n`],
    ['decimal fields one too wide', `0000000${repeat('  1120')}\n`],
    ['spaces before a number', `${' '.repeat(size)}35\n`],
    ['lines of small numbers', repeat('  35\n')],
    ['one line of bits alone', `${repeat('01110000')}\n`],
    ['lines of bits', repeat('0111000001100001\n')],
    ['stars after rows', repeat('0000001   a\n*\n')],
    ['stars that say a run too long to put back', repeat('0000001   a\n*\n7777777   b\n')],
    [
      'a star between every two rows',
      Array.from(
        { length: size / 16 },
        (_, row) => `${(row * 3).toString(8).padStart(7, '0')}   a\n*\n`,
      ).join(''),
    ],
  ])('%s', (_name, text) => {
    expect(scrubHexDumps(`${text}${OD_TU1}`, [PASSWORD])).toBe(`${text}${OD_TU1_SCRUBBED}`);
  });
});
