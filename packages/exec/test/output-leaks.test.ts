import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { scrubOutput, secretValuesOf } from '../src/environment.js';
import { execTool, value } from '../src/index.js';
import { OutputCapture } from '../src/output-capture.js';
import { NODE, scratchDir, serve } from './harness.js';

// Credentials known only as the values of the tool's credential-named variables (no pattern knows
// them), each holding a character some JSON writer, a URL or HTML escapes.
const KEYS = {
  SLASH_KEY: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCY',
  PLUS_KEY: 'q8Zr+Tn2Vb7Yw+Lm0PsA==',
  AMP_KEY: 'Kx9&mW2#pQ7<zR4>',
  ACCENT_KEY: 'pässwörtGeheim42',
  ASTRAL_KEY: 'key😀Astral9x',
} as const;
// A part of each that must never reach the model, in any form.
const FRAGMENTS = ['XUtnFEMI', 'Tn2Vb7Yw', 'mW2#pQ7', 'Geheim42', 'Astral9x'];

/** What a node program prints for each style: `{"value":<the key, written so>}`. */
const STYLES = {
  // PHP's json_encode: `\/`.
  php: 's => JSON.stringify(s).replace(/\\//g, "\\\\/")',
  // .NET's System.Text.Json: `+`, `&`, `<`, `>` as upper-case `\u002B`.
  dotnet:
    's => JSON.stringify(s).replace(/[+&<>]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0"))',
  // Go's encoding/json: `&`, `<`, `>` as lower-case `\u0026`, `\u003c`, `\u003e`.
  go: 's => JSON.stringify(s).replace(/[&<>]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"))',
  // Python's json.dumps (ensure_ascii): every non-ASCII code unit as `\uXXXX`, surrogate pairs included.
  python:
    's => JSON.stringify(s).replace(/[^\\x20-\\x7e]/g, c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"))',
  // Every character escaped, as some serialisers (and a hostile template) do.
  everything: 's => s.split("").map(c => "\\\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")).join("")',
  // A URL's query: encodeURIComponent (UTF-8 bytes as %XX).
  url: 's => "https://api.example.com/v1?key=" + encodeURIComponent(s) + "&page=2"',
  // HTML: numeric references, decimal and hex, and the named ones.
  html: 's => "<td>" + [...s].map(c => c === "&" ? "&amp;" : c === "<" ? "&lt;" : c === ">" ? "&gt;" : /[a-z0-9]/i.test(c) ? c : "&#" + c.codePointAt(0) + ";").join("") + "</td>"',
  htmlHex: 's => [...s].map(c => "&#x" + c.codePointAt(0).toString(16) + ";").join("")',
} as const;

const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', ...KEYS };
const printsKeys = execTool({
  name: 'prints_keys',
  description: 'Prints its keys as one JSON writer, a URL or HTML escapes them (test).',
  input: { style: z.enum(Object.keys(STYLES) as [keyof typeof STYLES]) },
  command: NODE,
  cwd: scratchDir(),
  env,
  args: (input) => [
    '-e',
    [
      'const write = eval(process.argv[1]);',
      'for (const name of ["SLASH_KEY", "PLUS_KEY", "AMP_KEY", "ACCENT_KEY", "ASTRAL_KEY"])',
      '  process.stdout.write(name + " " + write(process.env[name]) + " ok\\n");',
    ].join(' '),
    value(STYLES[input.style]),
  ],
});

// Text with escapes that holds no credential: it must come back as printed.
const HARMLESS = [
  '{"path":"C:\\\\Users\\\\app","url":"https:\\/\\/example.com\\/a?b=1\\u0026c=2","name":"J\\u00fcrgen \\"JJ\\""}',
  'GET /search?q=caf%C3%A9%20au%20lait&lang=en 200',
  '<p>Fish &amp; chips &lt;3 &#8364;12 &#x1F600; &nbsp; &copy;</p>',
  'printf("%2d%%\\n", x); /* \\x41 \\t */ 100%25 done',
  'ten percent: 10%, 50%2 tokens, &# not one, &#xZZ; \\u12 \\uZZZZ',
].join('\n');
// The config's last line holds a key as .NET writes it: the only part that goes.
const DOTNET_LINE = '{"key":"q8Zr\\u002BTn2Vb7Yw\\u002BLm0PsA=="}';
const harmlessDir = scratchDir();
writeFileSync(path.join(harmlessDir, 'harmless.txt'), `${HARMLESS}\n${DOTNET_LINE}`);
const printsHarmless = execTool({
  name: 'prints_harmless',
  description: 'Prints JSON, a URL, HTML and C text with escapes (test).',
  input: {},
  command: '/usr/bin/cat',
  cwd: harmlessDir,
  env,
  args: () => ['--', 'harmless.txt'],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve([printsKeys, printsHarmless], recordingLogger([]));
});
afterAll(async () => client.close());

describe('a known credential value written with escapes', () => {
  it.each(Object.keys(STYLES))(
    '%s: every key is scrubbed whole, escapes included; the text around it stays',
    async (style) => {
      const result = await client.callTool('prints_keys', { style });
      expect(result.isError).toBeUndefined();
      const { stdout } = parseResultText(result) as { stdout: string };
      const lines = stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(5);
      for (const [index, name] of Object.keys(KEYS).entries()) {
        const line = lines[index]!;
        expect(line.startsWith(`${name} `) && line.endsWith(' ok'), line).toBe(true);
        expect(line).toContain('[REDACTED]');
        // Nothing of the escaped form is left beside the marker: no escape, no character of the key.
        expect(line, line).toMatch(
          /^[A-Z]+_KEY (?:\{"value":"|"|https:\/\/api\.example\.com\/v1\?key=|<td>)?\[REDACTED\](?:"\}|"|&page=2|<\/td>)? ok$/,
        );
      }
      const whole = JSON.stringify(result);
      for (const fragment of FRAGMENTS) expect(whole).not.toContain(fragment);
    },
  );

  it('text with escapes that holds no credential comes back as printed, beside a key that goes', async () => {
    const result = await client.callTool('prints_harmless', {});
    expect(parseResultText(result)).toMatchObject({ stdout: `${HARMLESS}\n{"key":"[REDACTED]"}` });
  });
});

describe('the same, scrubbed from text (each writer, each escape)', () => {
  const values = secretValuesOf(KEYS);
  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ['PHP', '{"k":"wJalrXUtnFEMI\\/K7MDENG\\/bPxRfiCY"}', '{"k":"[REDACTED]"}'],
    ['.NET, upper case', '"q8Zr\\u002BTn2Vb7Yw\\u002BLm0PsA=="', '"[REDACTED]"'],
    ['.NET, lower case, `=` too', 'q8Zr\\u002bTn2Vb7Yw\\u002bLm0PsA\\u003d\\u003D;', '[REDACTED];'],
    ['Go', 'k=Kx9\\u0026mW2#pQ7\\u003czR4\\u003e.', 'k=[REDACTED].'],
    ['Python ensure_ascii', '"p\\u00e4ssw\\u00f6rtGeheim42"', '"[REDACTED]"'],
    ['a surrogate pair', 'key\\ud83d\\ude00Astral9x', '[REDACTED]'],
    ['\\x escapes', "'Kx9\\x26mW2#pQ7\\x3czR4\\x3e'", "'[REDACTED]'"],
    ['a URL', '?a=1&k=q8Zr%2BTn2Vb7Yw%2bLm0PsA%3D%3D&b=2', '?a=1&k=[REDACTED]&b=2'],
    ['a URL, UTF-8', '/u/p%C3%A4ssw%c3%b6rtGeheim42/x', '/u/[REDACTED]/x'],
    ['a URL, 4-byte UTF-8', 'key%F0%9F%98%80Astral9x', '[REDACTED]'],
    ['HTML, named', '<b>Kx9&amp;mW2#pQ7&lt;zR4&gt;</b>', '<b>[REDACTED]</b>'],
    ['HTML, numeric', 'q8Zr&#43;Tn2Vb7Yw&#x2B;Lm0PsA&#61;&#X3d;', '[REDACTED]'],
    ['HTML, astral', 'key&#128512;Astral9x and key&#x1f600;Astral9x', '[REDACTED] and [REDACTED]'],
    [
      'two writers in one output',
      'a "q8Zr\\u002BTn2Vb7Yw\\u002BLm0PsA==" b q8Zr%2BTn2Vb7Yw%2BLm0PsA%3D%3D c',
      'a "[REDACTED]" b [REDACTED] c',
    ],
    ['beside a plain one', 'q8Zr+Tn2Vb7Yw+Lm0PsA== q8Zr\\u002BTn2Vb7Yw+Lm0PsA==', '[REDACTED] [REDACTED]'],
  ];
  it.each(cases)('%s', (_name, text, scrubbed) => {
    expect(scrubOutput(text, values)).toBe(scrubbed);
  });

  // Realistic output with escapes and no known value: it must stay as it is.
  const unchanged = [
    HARMLESS,
    '{"msg":"Kx9\\u0026mW2 is not a key","n":"q8Zr\\u002B"}',
    'curl "https://example.com/?q=a%2Bb%3Dc&x=%E2%82%AC"',
    '&lt;script&gt;alert(1)&lt;/script&gt; &#60;&#x3C;',
    '"C:\\\\temp\\\\new\\\\file.txt"',
    'a\\\\u002Bb',
  ];
  it.each(unchanged)('stays as printed, beside a key that goes: %s', (text) => {
    expect(scrubOutput(text, values)).toBe(text);
    expect(scrubOutput(`${text}\n${DOTNET_LINE}`, values)).toBe(`${text}\n{"key":"[REDACTED]"}`);
  });

  it('an escaped backslash is not an escape: decoded left to right, once', () => {
    // `\\u002B` is a backslash, then `u002B`: not an escape of `+`.
    // After an escaped backslash, the key escaped: it goes, the backslash stays.
    expect(
      scrubOutput('q8Zr\\\\u002BTn2Vb7Yw\\u002BLm0PsA== \\\\q8Zr\\u002BTn2Vb7Yw\\u002BLm0PsA==', values),
    ).toBe('q8Zr\\\\u002BTn2Vb7Yw\\u002BLm0PsA== \\\\[REDACTED]');
  });
});

describe('a file in UTF-16 printed as it is', () => {
  const CARRIER_KEY = 'Zq7vLw93KpXa1RtY';
  const DB_PASS = 'pässwörtGeheim42';
  const dir = scratchDir();
  const text = `password=hunter2xyz\r\ncarrier=${CARRIER_KEY}\r\ndb=${DB_PASS}\r\nregion=eu-west-42\r\n`;
  const little = Buffer.from(text, 'utf16le');
  const files = {
    'utf16le-bom.txt': Buffer.concat([Buffer.from([0xff, 0xfe]), little]),
    'utf16le.txt': little,
    'utf16be-bom.txt': Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(little).swap16()]),
    'utf16be.txt': Buffer.from(little).swap16(),
    // NUL-separated records and NUL padding: no UTF-16.
    'environ.bin': Buffer.concat([
      Buffer.from(`HOME=/home/app\0LANG=C\0a\0b\0c\0d\0e\0${'\0'.repeat(32)}end\n`),
      Buffer.from(`key ${CARRIER_KEY}`, 'utf16le'),
    ]),
    'mixed.txt': Buffer.concat([Buffer.from('header line\n'), little, Buffer.from('footer line\n')]),
  } as const;
  for (const [name, bytes] of Object.entries(files)) writeFileSync(path.join(dir, name), bytes);
  const show = execTool({
    name: 'show_file',
    description: 'Shows a settings file (test).',
    input: { file: z.enum(Object.keys(files) as [keyof typeof files]) },
    command: '/usr/bin/cat',
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', CARRIER_KEY, DB_PASS },
    args: (input) => ['--', value(input.file)],
  });
  let utf16Client: TestClient;
  beforeAll(async () => {
    utf16Client = await serve([show], recordingLogger([]));
  });
  afterAll(async () => utf16Client.close());

  it.each(['utf16le-bom.txt', 'utf16le.txt', 'utf16be-bom.txt', 'utf16be.txt', 'mixed.txt'] as const)(
    '%s: the password, the known ASCII value and the known Latin-1 one are scrubbed; the rest stays',
    async (file) => {
      const result = await utf16Client.callTool('show_file', { file });
      expect(result.isError).toBeUndefined();
      const { stdout } = parseResultText(result) as { stdout: string };
      const shown = stdout.replaceAll('\0', '');
      for (const fragment of ['hunter2', 'Zq7vLw93', 'KpXa1RtY', 'Geheim42', 'p\u00e4ss']) {
        expect(shown, file).not.toContain(fragment);
      }
      expect(shown).toContain('password=[REDACTED]');
      expect(shown).toContain('carrier=[REDACTED]');
      expect(shown).toContain('db=[REDACTED]');
      expect(shown).toContain('region=eu-west-42');
      if (file === 'mixed.txt')
        expect(shown.startsWith('header line\n') && shown.endsWith('footer line\n')).toBe(true);
    },
  );

  it('NUL-separated records and NUL padding come back as printed; only the UTF-16 key after them goes', async () => {
    const result = await utf16Client.callTool('show_file', { file: 'environ.bin' });
    expect(parseResultText(result)).toMatchObject({
      stdout: `HOME=/home/app\0LANG=C\0a\0b\0c\0d\0e\0${'\0'.repeat(32)}end\nk\0e\0y\0 \0[REDACTED]\0`,
    });
  });
});

describe('a known value written with escapes or in UTF-16, at the output cap or the stderr tail', () => {
  // The model pads its input so that the cut falls inside the key's escaped form: all of it but its
  // last characters would be kept, and no decoded match would see it.
  const PLUS_KEY = KEYS.PLUS_KEY;
  const escaped = 'q8Zr\\u002BTn2Vb7Yw\\u002BLm0PsA==';
  const utf16 = Buffer.from(PLUS_KEY, 'utf16le').toString('latin1');
  const echoes = execTool({
    name: 'echoes_escaped',
    description: 'Reports a rejected key in JSON or UTF-16 next to a file name (test).',
    input: { file: z.string(), form: z.enum(['json', 'utf16']), code: z.enum(['0', '1']) },
    command: NODE,
    cwd: scratchDir(),
    env: { PATH: '/usr/bin:/bin', PLUS_KEY },
    maxOutputBytes: 100,
    stderrTailBytes: 64,
    args: (input) => [
      '-e',
      [
        'const [file, form, code] = process.argv.slice(1), key = process.env.PLUS_KEY;',
        'const shown = form === "json" ? JSON.stringify(key).slice(1, -1).replace(/\\+/g, "\\\\u002B") : Buffer.from(key, "utf16le");',
        'process.stdout.write("file " + file + " key ");',
        'process.stdout.write(shown);',
        'process.stdout.write("\\n");',
        'process.stderr.write("key ");',
        'process.stderr.write(shown);',
        'process.stderr.write(" rejected for " + file);',
        'process.exitCode = Number(code);',
      ].join(' '),
      value(input.file),
      value(input.form),
      value(input.code),
    ],
  });
  let cutClient: TestClient;
  beforeAll(async () => {
    cutClient = await serve([echoes], recordingLogger([]));
  });
  afterAll(async () => cutClient.close());

  it.each([
    ['json', escaped],
    ['utf16', utf16],
  ] as const)('%s: dropped whole at the end of the kept output', async (form, shown) => {
    // "file " + file + " key " puts the key's form at 5 + file + 5: the 100-byte cut falls 3 bytes
    // before its end.
    const file = 'a'.repeat(100 - 10 - shown.length + 3);
    const result = await cutClient.callTool('echoes_escaped', { file, form, code: '0' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({ stdout: `file ${file} key `, truncated: true });
    expect(JSON.stringify(result).replace(/\\u0000/g, '')).not.toContain('Tn2Vb7Yw');
  });

  it.each([
    ['json', escaped],
    ['utf16', utf16],
  ] as const)('%s: dropped whole at the start of the stderr tail of a failure', async (form, shown) => {
    // " rejected for " + file is 14 + file bytes: the 64-byte tail starts 3 bytes into the key's form.
    const file = 'b'.repeat(64 - 14 - shown.length + 3);
    const envelope = expectFailure(await cutClient.callTool('echoes_escaped', { file, form, code: '1' }));
    expect(envelope.message).toBe(
      `The program exited with code 1. stderr (last 64 bytes): rejected for ${file}`,
    );
  });

  it('OutputCapture: a cut inside any escaped or UTF-16 form moves off it', () => {
    const forms = [
      escaped,
      'q8Zr%2BTn2Vb7Yw%2BLm0PsA%3D%3D',
      'q8Zr&#43;Tn2Vb7Yw&#x2b;Lm0PsA==',
      Buffer.from(PLUS_KEY, 'utf16le').swap16().toString('latin1'),
    ];
    for (const form of forms) {
      const bytes = Buffer.from(`head ${form} tail`, 'latin1');
      for (let limit = 6; limit < 5 + form.length; limit += 1) {
        const output = new OutputCapture(limit, limit, [Buffer.from(PLUS_KEY)]);
        output.push(bytes);
        expect(output.text(), `${form} cut at ${limit}`).toBe('head ');
        const tail = new OutputCapture(1000, bytes.length - limit, [Buffer.from(PLUS_KEY)]);
        tail.push(bytes);
        expect(tail.tailText(), `${form} tail from ${limit}`).toBe(' tail');
      }
    }
  });
});

describe('hostile inputs shaped like escapes and UTF-16 (read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  const values = secretValuesOf(KEYS);
  const SECRET_LINE = '\n"q8Zr\\u002BTn2Vb7Yw\\u002BLm0PsA=="\n';
  it.each([
    ['JSON escapes', repeat('\\u0041')],
    ['backslashes', repeat('\\')],
    ['escapes cut short', repeat('\\u00')],
    ['percent bytes', repeat('%41')],
    ['percent lead bytes with no continuation', repeat('%F0')],
    ['percents cut short', repeat('%2')],
    ['HTML references', repeat('&#43;')],
    ['HTML references that never end', repeat('&#1234567')],
    ['ampersands', repeat('&')],
    ['UTF-16 of a near miss', repeat('q\u00008\u0000Z\u0000r\u0000+\u0000T\u0000')],
    ['NULs', '\0'.repeat(size)],
    ['NUL runs of three', repeat('a\0b\0c\0\n')],
  ])('%s', (_name, text) => {
    expect(scrubOutput(`${text}${SECRET_LINE}`, values)).toBe(`${text}\n"[REDACTED]"\n`);
  });

  it('a capture cut inside a key escaped among 200 KB of escapes', () => {
    const half = repeat('\\u0041%41&#65;').slice(0, size / 2);
    const key = 'q8Zr%2BTn2Vb7Yw%2BLm0PsA%3D%3D';
    const output = new OutputCapture(size / 2 + 10, size / 2 + 10, [Buffer.from(KEYS.PLUS_KEY)]);
    output.push(Buffer.from(`${half}${key}${half}`));
    expect(output.text()).toBe(half);
    expect(output.tailText()).toBe(half);
  });
});
