import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { scrubOutput, secretValuesOf } from '../src/environment.js';
import { execTool, value } from '../src/index.js';
import { OutputCapture } from '../src/output-capture.js';
import { NODE, scratchDir, serve } from './harness.js';

// Credentials known only as the values of the tool's credential-named variables (no pattern knows
// them), each holding characters shells, CSV, SQL and the languages' literals quote or escape.
const KEYS = {
  QUOTE_KEY: `Kx9$mW2"pQ7 zR4'q&Tb`,
  UTF8_TOKEN: `pä$s wört€Geheim"42'x`,
} as const;
// A part of each that must never reach the model, in any form.
const FRAGMENTS = ['mW2', 'pQ7', 'zR4', 'Geheim', 'rt\\u20ac', 'w\\u00f6', '42'];

/** What a node program prints for each style: the key, written so. */
const STYLES = {
  // bash `printf %q`: a backslash before each character the shell would read.
  printfQ: String.raw`s => s.replace(/[$"' &!*?(){}\[\];|<>~#\\]/g, c => "\\" + c)`,
  // CSV (psql --csv, sqlite3 -csv): the field quoted, each `"` doubled.
  csv: `s => '"' + s.replaceAll('"', '""') + '"'`,
  // A SQL literal, YAML's single-quoted scalar: each `'` doubled.
  sql: `s => "'" + s.replaceAll("'", "''") + "'"`,
  // bash's `\${x@Q}` and `set -x`: each `'` closed, escaped and reopened.
  shellQuote: String.raw`s => "'" + s.replaceAll("'", "'\\''") + "'"`,
  // Python's shlex.quote.
  shlex: `s => "'" + s.replaceAll("'", "'\\"'\\"'") + "'"`,
  // git's quoted paths, C: every byte but letters and digits in octal, UTF-8 bytes included.
  octal: String.raw`s => '"' + [...Buffer.from(s)].map(b => /[A-Za-z0-9]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : "\\" + b.toString(8).padStart(3, "0")).join("") + '"'`,
  // Python's bytes repr: `\xXX` of the UTF-8 bytes.
  hexBytes: String.raw`s => "b'" + [...Buffer.from(s)].map(b => /[A-Za-z0-9]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : "\\x" + b.toString(16).padStart(2, "0")).join("") + "'"`,
  // The same, upper case `\X`.
  upperX: String.raw`s => '"' + [...Buffer.from(s)].map(b => /[A-Za-z0-9]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : "\\X" + b.toString(16).toUpperCase()).join("") + '"'`,
  // JavaScript, Rust, Swift: `\u{24}`.
  braces: String.raw`s => '"' + [...s].map(c => /[A-Za-z0-9]/.test(c) ? c : "\\u{" + c.codePointAt(0).toString(16) + "}").join("") + '"'`,
  // Python, C: `\U00000024`.
  upperU: String.raw`s => '"' + [...s].map(c => /[A-Za-z0-9]/.test(c) ? c : "\\U" + c.codePointAt(0).toString(16).padStart(8, "0")).join("") + '"'`,
  // Perl's Data::Dumper (Useqq): `\$`, `\@`, `\"`, and `\x{20ac}` past ASCII.
  perl: String.raw`s => '"' + [...s].map(c => /[$@"\\]/.test(c) ? "\\" + c : c.codePointAt(0) > 127 ? "\\x{" + c.codePointAt(0).toString(16) + "}" : c).join("") + '"'`,
  // CSS: hex digits and the space that ends them.
  css: String.raw`s => [...s].map(c => /[A-Za-z0-9]/.test(c) ? c : "\\" + c.codePointAt(0).toString(16) + " ").join("")`,
  // CSS, six digits and no space.
  css6: String.raw`s => [...s].map(c => /[A-Za-z0-9]/.test(c) ? c : "\\" + c.codePointAt(0).toString(16).padStart(6, "0")).join("")`,
  // An HTML form's body (application/x-www-form-urlencoded): `+` for a space.
  form: `s => "key=" + encodeURIComponent(s).replace(/%20/g, "+") + "&x=1"`,
} as const;

const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', ...KEYS };
const printsKeys = execTool({
  name: 'prints_keys',
  description: 'Prints its keys as a shell, CSV, SQL or a language quotes them (test).',
  input: { style: z.enum(Object.keys(STYLES) as [keyof typeof STYLES]) },
  command: NODE,
  cwd: scratchDir(),
  env,
  args: (input) => [
    '-e',
    [
      'const write = eval(process.argv[1]);',
      'for (const name of ["QUOTE_KEY", "UTF8_TOKEN"])',
      '  process.stdout.write(name + " " + write(process.env[name]) + " ok\\n");',
    ].join(' '),
    value(STYLES[input.style]),
  ],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve([printsKeys], recordingLogger([]));
});
afterAll(async () => client.close());

describe('a known credential value quoted or escaped as shells, CSV, SQL, C, CSS and forms write it', () => {
  it.each(Object.keys(STYLES))('%s: every key is scrubbed whole, escapes included', async (style) => {
    const result = await client.callTool('prints_keys', { style });
    expect(result.isError).toBeUndefined();
    const { stdout } = parseResultText(result) as { stdout: string };
    const lines = stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(2);
    for (const [index, name] of Object.keys(KEYS).entries()) {
      // Nothing of the written form is left beside the marker: no escape, no character of the key.
      expect(lines[index], lines[index]).toMatch(
        new RegExp(`^${name} (?:"|'|b'|key=)?\\[REDACTED\\](?:"|'|&x=1)? ok$`),
      );
    }
    const whole = JSON.stringify(result);
    for (const fragment of FRAGMENTS) expect(whole).not.toContain(fragment);
  });
});

describe('the same, scrubbed from text', () => {
  const values = secretValuesOf(KEYS);
  const cases: ReadonlyArray<readonly [string, string, string]> = [
    ['printf %q', String.raw`x=Kx9\$mW2\"pQ7\ zR4\'q\&Tb;`, 'x=[REDACTED];'],
    ['printf %q inside double quotes', String.raw`"Kx9\$mW2\"pQ7 zR4'q&Tb"`, '"[REDACTED]"'],
    ['CSV', `1,"Kx9$mW2""pQ7 zR4'q&Tb",ok`, '1,"[REDACTED]",ok'],
    ['SQL', `VALUES ('Kx9$mW2"pQ7 zR4''q&Tb');`, "VALUES ('[REDACTED]');"],
    ['bash x@Q', `'Kx9$mW2"pQ7 zR4'\\''q&Tb'`, "'[REDACTED]'"],
    ['shlex.quote', `'Kx9$mW2"pQ7 zR4'"'"'q&Tb'`, "'[REDACTED]'"],
    ['octal, three digits', String.raw`Kx9\044mW2\042pQ7\040zR4\047q\046Tb`, '[REDACTED]'],
    ['octal, short', String.raw`Kx9\44mW2\42pQ7\40zR4\47q\46Tb`, '[REDACTED]'],
    ['octal UTF-8 (git)', String.raw`"p\303\244$s w\303\266rt\342\202\254Geheim\"42'x"`, '"[REDACTED]"'],
    ['\\x UTF-8 bytes', String.raw`p\xc3\xa4$s w\xC3\xB6rt\xe2\x82\xacGeheim"42'x`, '[REDACTED]'],
    ['\\x Latin-1, \\u and \\$', String.raw`p\xe4\$s\ w\xf6rt\u20acGeheim\"42\'x`, '[REDACTED]'],
    ['\\u{}', String.raw`Kx9\u{24}mW2\u{22}pQ7\u{0020}zR4\u{27}q\u{26}Tb`, '[REDACTED]'],
    ['\\U', String.raw`Kx9\U00000024mW2\U00000022pQ7\U00000020zR4\U00000027q\U00000026Tb`, '[REDACTED]'],
    ['\\X', String.raw`Kx9\X24mW2\X22pQ7\X20zR4\X27q\X26Tb`, '[REDACTED]'],
    ['\\x{}', String.raw`p\x{e4}$s w\x{f6}rt\x{20ac}Geheim"42'x`, '[REDACTED]'],
    ['CSS, a space after each', String.raw`Kx9\24 mW2\22 pQ7\20 zR4\27 q\26 Tb`, '[REDACTED]'],
    ['CSS, a line break after one', 'Kx9\\24\r\nmW2\\22 pQ7\\20 zR4\\27 q\\26 Tb', '[REDACTED]'],
    ['CSS, six digits', String.raw`Kx9\000024mW2\000022pQ7\000020zR4\000027q\000026Tb`, '[REDACTED]'],
    ['CSS, no space before a non-hex', String.raw`Kx9\24mW2\22pQ7\20zR4\27q\26Tb`, '[REDACTED]'],
    ['CSS, a backslash before a letter', String.raw`\Kx9\24 mW2\"pQ7\ zR4\'\q\&Tb`, '[REDACTED]'],
    ['a form', `a=1&key=Kx9%24mW2%22pQ7+zR4'q%26Tb&b=2`, 'a=1&key=[REDACTED]&b=2'],
    ['a form, UTF-8', 'p%C3%A4%24s+w%C3%B6rt%E2%82%ACGeheim%2242%27x', '[REDACTED]'],
  ];
  it.each(cases)('%s', (_name, text, scrubbed) => {
    expect(scrubOutput(text, values)).toBe(scrubbed);
  });

  // Realistic output with quotes and escapes and no known value: it must stay as it is.
  const CSV_LINE = `2,"Kx9$mW2""pQ7 zR4'q&Tb"`;
  const unchanged = [
    String.raw`cp /home/app/My\ Documents/report\ \(final\).pdf /tmp/`,
    `+ echo 'it'\\''s done' 'don'"'"'t'`,
    'id,name,quote\n1,"Smith, John","He said ""hi"""\n2,"",""""',
    "INSERT INTO t (a, b, c) VALUES ('O''Brien', 'it''s', '', '''quoted''');",
    String.raw`?? "docs/caf\303\251.md" "a\tb\\c\"d"`,
    String.raw`const s = "\u{1F600} \x41 \$ \U0001F600 \x{263A} \0 \777";`,
    String.raw`.icon::before { content: "\f101"; } a[href$=\.pdf] { font: 12px/1.5 "A\26 B"; }`,
    'GET /search?q=hello+world&lang=en+US&sum=1%2B1 200',
    String.raw`C:\Users\app\AppData\Local\Temp\1234\file.txt`,
    String.raw`grep -E '^\d+\.\d+$' | sed 's/\//\\/g'`,
    String.raw`b'\x00\x01\xff\xc3\xa4' mW2 pQ7 zR4`,
  ];
  it.each(unchanged)('stays as printed, beside a key that goes: %s', (text) => {
    expect(scrubOutput(text, values)).toBe(text);
    expect(scrubOutput(`${text}\n${CSV_LINE}`, values)).toBe(`${text}\n2,"[REDACTED]"`);
  });

  it('a value is matched in the decoded view whole, not as a prefix of longer escaped text', () => {
    // `\\$` is a backslash, then `$`: not the key; the key after an escaped backslash goes.
    expect(scrubOutput(String.raw`Kx9\\$mW2\"pQ7\ zR4\'q\&Tb \\Kx9\$mW2\"pQ7\ zR4\'q\&Tb`, values)).toBe(
      String.raw`Kx9\\$mW2\"pQ7\ zR4\'q\&Tb \\[REDACTED]`,
    );
  });
});

describe('a known value quoted or escaped so, at the output cap or the stderr tail', () => {
  const QUOTE_KEY = KEYS.QUOTE_KEY;
  const forms = {
    printfQ: String.raw`Kx9\$mW2\"pQ7\ zR4\'q\&Tb`,
    csv: `Kx9$mW2""pQ7 zR4'q&Tb`,
    shlex: `Kx9$mW2"pQ7 zR4'"'"'q&Tb`,
    octal: String.raw`Kx9\044mW2\042pQ7\040zR4\047q\046Tb`,
    upperU: String.raw`Kx9\U00000024mW2\U00000022pQ7\U00000020zR4\U00000027q\U00000026Tb`,
    css: String.raw`Kx9\24 mW2\22 pQ7\20 zR4\27 q\26 Tb`,
    form: `Kx9%24mW2%22pQ7+zR4'q%26Tb`,
  } as const;
  const echoes = execTool({
    name: 'echoes_quoted',
    description: 'Reports a rejected key, quoted, next to a file name (test).',
    input: {
      file: z.string(),
      form: z.enum(Object.keys(forms) as [keyof typeof forms]),
      code: z.enum(['0', '1']),
    },
    command: NODE,
    cwd: scratchDir(),
    env: { PATH: '/usr/bin:/bin', QUOTE_KEY },
    maxOutputBytes: 200,
    stderrTailBytes: 120,
    args: (input) => [
      '-e',
      [
        'const [file, shown, code] = process.argv.slice(1);',
        'process.stdout.write("file " + file + " key " + shown + "\\n");',
        'process.stderr.write("key " + shown + " rejected for " + file);',
        'process.exitCode = Number(code);',
      ].join(' '),
      value(input.file),
      // The form is the declaration's (the test's), not the model's: it stands for what the program prints.
      value(forms[input.form]),
      value(input.code),
    ],
  });
  let cutClient: TestClient;
  beforeAll(async () => {
    cutClient = await serve([echoes], recordingLogger([]));
  });
  afterAll(async () => cutClient.close());

  it.each(Object.entries(forms))('%s: dropped whole at the end of the kept output', async (form, shown) => {
    // "file " + file + " key " puts the key's form at 5 + file + 5: the 200-byte cut falls 3 bytes
    // before its end.
    const file = 'a'.repeat(200 - 10 - shown.length + 3);
    const result = await cutClient.callTool('echoes_quoted', { file, form, code: '0' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({ stdout: `file ${file} key `, truncated: true });
    expect(JSON.stringify(result)).not.toContain('zR4');
  });

  it.each(Object.entries(forms))('%s: dropped whole at the start of the stderr tail', async (form, shown) => {
    // " rejected for " + file is 14 + file bytes: the 120-byte tail starts 3 bytes into the key's form.
    const file = 'b'.repeat(120 - 14 - shown.length + 3);
    const envelope = expectFailure(await cutClient.callTool('echoes_quoted', { file, form, code: '1' }));
    expect(envelope.message).toBe(
      `The program exited with code 1. stderr (last 120 bytes): rejected for ${file}`,
    );
  });

  it('OutputCapture: a cut anywhere inside any of the forms moves off it', () => {
    const secrets = secretValuesOf({ QUOTE_KEY }).map((secret) => Buffer.from(secret));
    const all = [
      ...Object.values(forms),
      `Kx9$mW2"pQ7 zR4''q&Tb`,
      `Kx9$mW2"pQ7 zR4'\\''q&Tb`,
      String.raw`Kx9\u{24}mW2\u{22}pQ7\u{20}zR4\u{27}q\u{26}Tb`,
      String.raw`Kx9\000024mW2\000022pQ7\000020zR4\000027q\000026Tb`,
    ];
    for (const form of all) {
      const bytes = Buffer.from(`head ${form} tail`);
      for (let limit = 6; limit < 5 + form.length; limit += 1) {
        const output = new OutputCapture(limit, limit, secrets);
        output.push(bytes);
        expect(output.text(), `${form} cut at ${limit}`).toBe('head ');
        const tail = new OutputCapture(1000, bytes.length - limit, secrets);
        tail.push(bytes);
        expect(tail.tailText(), `${form} tail from ${limit}`).toBe(' tail');
      }
    }
  });

  it.each([
    ['octal bytes', String.raw`p\303\244\044s\040w\303\266rt\342\202\254Geheim\04242\047x`],
    // printf %q in a UTF-8 locale leaves the characters past ASCII as they are.
    ['printf %q, characters past ASCII as themselves', String.raw`pä\$s\ wört€Geheim\"42\'x`],
  ])('OutputCapture: a cut inside a UTF-8 value written as %s moves off it', (_name, form) => {
    const UTF8_TOKEN = KEYS.UTF8_TOKEN;
    const secrets = secretValuesOf({ UTF8_TOKEN }).map((secret) => Buffer.from(secret));
    const bytes = Buffer.from(`head ${form} tail`);
    for (let limit = 6; limit < 5 + Buffer.byteLength(form); limit += 1) {
      const output = new OutputCapture(limit, limit, secrets);
      output.push(bytes);
      expect(output.text(), `cut at ${limit}`).toBe('head ');
      const tail = new OutputCapture(1000, bytes.length - limit, secrets);
      tail.push(bytes);
      expect(tail.tailText(), `tail from ${limit}`).toBe(' tail');
    }
  });
});

describe('hostile inputs shaped like the new escapes and quotes (read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  const values = secretValuesOf(KEYS);
  const SECRET_LINE = `\n1,"Kx9$mW2""pQ7 zR4'q&Tb"\nKx9\\044mW2\\042pQ7\\040zR4\\047q\\046Tb\nKx9\\24 mW2\\22 pQ7\\20 zR4\\27 q\\26 Tb\n`;
  const REDACTED_LINE = '\n1,"[REDACTED]"\n[REDACTED]\n[REDACTED]\n';
  it.each([
    ['escaped punctuation', repeat('\\$')],
    ['octal bytes', repeat('\\044')],
    ['octal lead bytes with no continuation', repeat('\\342')],
    ['octal past a byte', repeat('\\777')],
    ['\\x lead bytes', repeat('\\xe2\\x82')],
    ['\\u{ never closed', repeat('\\u{10ffff')],
    ['\\u{} too large', repeat('\\u{110000}')],
    ['\\U cut short', repeat('\\U0000')],
    ['\\x{ never closed', repeat('\\x{')],
    ['CSS escapes', repeat('\\24 ')],
    ['CSS runs of seven digits', repeat('\\1234567')],
    ['CSS escapes before line breaks', repeat('\\a\r\n')],
    ['doubled double quotes', repeat('""')],
    ['doubled single quotes', repeat("''")],
    ['shell requotes', repeat(`'\\''"'"'`)],
    ['pluses', repeat('+')],
    ['a near miss, quoted', repeat(`Kx9$mW2""pQ7 zR4''`)],
    ['a near miss, escaped', repeat('Kx9\\$mW2\\"pQ7\\ zR4\\')],
  ])('%s', (_name, text) => {
    expect(scrubOutput(`${text}${SECRET_LINE}`, values)).toBe(`${text}${REDACTED_LINE}`);
  });

  it('a capture cut inside a key in octal among 200 KB of escapes', () => {
    const half = repeat('\\044\\u{24}\\24 ""').slice(0, size / 2);
    const key = String.raw`Kx9\044mW2\042pQ7\040zR4\047q\046Tb`;
    const secrets = secretValuesOf(KEYS).map((secret) => Buffer.from(secret));
    const output = new OutputCapture(size / 2 + 10, size / 2 + 10, secrets);
    output.push(Buffer.from(`${half}${key}${half}`));
    expect(output.text()).toBe(half);
    expect(output.tailText()).toBe(half);
  });
});
