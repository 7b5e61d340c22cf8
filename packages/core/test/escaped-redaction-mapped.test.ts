// A secret found only once the text's escapes are decoded (`\u0070assword=x`, `pass&#119;ord=x`) is
// redacted in the text as written: only what a pattern replaced changes, and every other escape stays
// as the text wrote it. A tool that escaped markdown or HTML on purpose (`&lt;!-- ... --&gt;` made
// inert, `\u0060` backticks) must not get live markup back because a secret sat somewhere in its text.
import type { ElicitRequest } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  defineTool,
  ok,
  REDACTED,
  redactSecretsInText,
  type SecretPattern,
  ToolError,
} from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;

/**
 * The escapes this file's texts use, decoded in one pass as core reads them: JSON's `\u00XX` (one
 * backslash), HTML's decimal and hex references and a few named ones. The texts hold no quote and no
 * other backslash, where core's decoding has more to say.
 */
function decode(text: string): string {
  const named: Record<string, string> = { lt: '<', gt: '>', amp: '&', grave: '`', equals: '=' };
  return text.replace(
    /\\u00([2-7][0-9A-Fa-f])|&#[xX]([0-9A-Fa-f]+);|&#(\d+);|&([A-Za-z]+);/g,
    (written, json?: string, hex?: string, decimal?: string, name?: string) => {
      if (json !== undefined) return String.fromCharCode(Number.parseInt(json, 16));
      if (hex !== undefined) return String.fromCharCode(Number.parseInt(hex, 16));
      if (decimal !== undefined) return String.fromCharCode(Number.parseInt(decimal, 10));
      return named[name ?? ''] ?? written;
    },
  );
}

describe('a secret found only decoded is redacted in the text as written', () => {
  it('keeps escaped HTML markup beside an escaped secret', () => {
    const text = 'note &lt;!-- hidden --&gt; and \\u0070assword=hunter2';
    const out = redactSecretsInText(text);
    expect(out).toBe(`note &lt;!-- hidden --&gt; and \\u0070assword=${R}`);
    expect(out).not.toContain('<!--');
    expect(decode(out)).toBe(`note <!-- hidden --> and password=${R}`);
    // Redacting again changes nothing.
    expect(redactSecretsInText(out)).toBe(out);
  });

  it("keeps JSON's \\u0060 backticks escaped beside a \\u0070assword secret", () => {
    // JSON text whose backticks and `p` are written as `\u` escapes.
    const text = '{"msg":"run \\u0060rm -rf /tmp/x\\u0060 then \\u0070assword=hunter2 ok"}';
    const out = redactSecretsInText(text);
    expect(out).toBe(`{"msg":"run \\u0060rm -rf /tmp/x\\u0060 then \\u0070assword=${R} ok"}`);
    expect(out).not.toContain('`');
    // Still JSON, reading as the redaction.
    expect(JSON.parse(out)).toEqual({ msg: `run \`rm -rf /tmp/x\` then password=${R} ok` });
  });

  it('removes a secret whose own characters are escaped, with its escapes', () => {
    expect(redactSecretsInText('password&#61;hun&#116;er2 end &lt;i&gt;')).toBe(
      `password&#61;${R} end &lt;i&gt;`,
    );
    expect(redactSecretsInText('pass&#119;ord=hunter2 &lt;b&gt;')).toBe(`pass&#119;ord=${R} &lt;b&gt;`);
    const xml = 'x &lt;password&gt;Zq8\\u0073ecr&#101;tA1&lt;/password&gt; &lt;!-- c --&gt;';
    const out = redactSecretsInText(xml);
    expect(out).toBe(`x &lt;password&gt;${R}&lt;/password&gt; &lt;!-- c --&gt;`);
    expect(out).not.toContain('\\u0073');
    expect(out).not.toContain('&#101;');
  });

  it('a pattern that keeps its key ($1) keeps the escapes the key was written with', () => {
    expect(redactSecretsInText('\\u0070assword\\u003dhunter2 \\u0060x\\u0060')).toBe(
      `\\u0070assword\\u003d${R} \\u0060x\\u0060`,
    );
    expect(redactSecretsInText('api\\u005fkey: Kk99sEcretvalue1 &lt;x&gt;')).toBe(
      `api\\u005fkey: ${R} &lt;x&gt;`,
    );
    expect(redactSecretsInText('send \\u0062earer abcdefghijklmnop1234 &lt;x&gt;')).toBe(
      `send \\u0062earer ${R} &lt;x&gt;`,
    );
    // A quoted value's quotes are kept by the pattern: as the text wrote them.
    expect(redactSecretsInText('&quot;password&quot;:&quot;hunter2&quot; &lt;b&gt;')).toBe(
      `&quot;password&quot;:&quot;${R}&quot; &lt;b&gt;`,
    );
  });

  it("expands a custom pattern's $&, $<name>, $$, $`, $' and $nn as String.prototype.replace does", () => {
    const named: SecretPattern[] = [
      { name: 'pin', pattern: /(?<key>pin)=(?<val>\d+)/g, replace: '$<key>:$$X($&)$<none>' },
    ];
    const text = '&lt;b&gt; p&#105;n&#61;1234 &lt;/b&gt;';
    const out = redactSecretsInText(text, named);
    // What the replacement copies of the match keeps its escapes; its own characters are as written.
    expect(out).toBe('&lt;b&gt; p&#105;n:$X(p&#105;n&#61;1234) &lt;/b&gt;');
    expect(decode(out)).toBe(decode(text).replace(named[0]!.pattern, named[0]!.replace));

    const numbered: SecretPattern[] = [{ name: 'k', pattern: /k(\d)/g, replace: "[$`|$'|$1|$10|$0|$<x>|$]" }];
    const numberedText = '&lt;k&#49;&gt;';
    const numberedOut = redactSecretsInText(numberedText, numbered);
    expect(numberedOut).toBe('&lt;[&lt;|&gt;|&#49;|&#49;0|$0|$<x>|$]&gt;');
    expect(decode(numberedOut)).toBe(decode(numberedText).replace(/k(\d)/g, "[$`|$'|$1|$10|$0|$<x>|$]"));

    // A pattern without the `g` flag replaces its first match only, as applyPatterns has it; `requires`
    // still gates it.
    const once: SecretPattern[] = [{ name: 'once', pattern: /p(in)=\d+/, replace: '$1', requires: /in=/ }];
    expect(redactSecretsInText('p&#105;n=1 p&#105;n=2 &lt;', once)).toBe('&#105;n p&#105;n=2 &lt;');
    expect(redactSecretsInText('p&#105;n:1 &lt;', once)).toBe('p&#105;n:1 &lt;');

    // Where the text cannot be written back so that it decodes to the redaction (its only quote was
    // redacted, so `&quot;` would read as `"` where the redaction read `\"`), the decoded redaction.
    const quoted: SecretPattern[] = [{ name: 'q', pattern: /secret"\w+/g, replace: 'X' }];
    expect(redactSecretsInText('&quot;a&quot; s&#101;cret"abc', quoted)).toBe('\\"a\\" X');
  });

  it('over a seeded corpus: decoded, the output is the decoded input redacted; markup stays escaped; no secret survives', () => {
    let seed = 0x5eed1234;
    const random = (): number => {
      // mulberry32
      seed = (seed + 0x6d2b79f5) | 0;
      let t = seed;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const ALNUM = [...'abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789'];
    // One character written as itself, as JSON's escape or as an HTML reference.
    const escapeChar = (char: string, p: number): string => {
      if (random() >= p) return char;
      const code = char.charCodeAt(0);
      return pick([
        `\\u00${code.toString(16).padStart(2, '0')}`,
        `&#${code};`,
        `&#x${code.toString(16).toUpperCase()};`,
      ]);
    };
    const escaped = (word: string, p: number): string => [...word].map((c) => escapeChar(c, p)).join('');
    const MARKUP = [
      '&lt;!-- hidden --&gt;',
      '\\u0060code\\u0060',
      '&lt;b&gt;bold&lt;/b&gt;',
      '&amp;',
      '&#91;link&#93;',
      '&grave;tick&grave;',
    ];
    const WORDS = ['note', 'retry', 'order', 'shipped', 'alpha', '42', 'the', 'queue'];
    const KEYS: readonly ((key: string, value: string) => string)[] = [
      (k, v) => `${k}=${v}`,
      (k, v) => `${k}: ${v}`,
      (k, v) => `${k}&#61;${v}`,
      (k, v) => `&lt;${k}&gt;${v}&lt;/${k}&gt;`,
    ];
    const NAMES = ['password', 'token', 'api_key', 'client_secret'];

    let escapedOnly = 0;
    for (let n = 0; n < 3000; n += 1) {
      const parts: string[] = [];
      const secrets: string[] = [];
      const written: string[] = [];
      const markup = new Map<string, number>();
      const count = 3 + Math.floor(random() * 6);
      for (let i = 0; i < count; i += 1) {
        const kind = random();
        if (kind < 0.35) {
          const token = pick(MARKUP);
          markup.set(token, (markup.get(token) ?? 0) + 1);
          parts.push(token);
        } else if (kind < 0.7) {
          let value = `Sv${Array.from({ length: 14 }, () => pick(ALNUM)).join('')}9`;
          while (secrets.includes(value)) value += 'x';
          // The key as written, or with its last letter escaped (and maybe others): then only the
          // decoded pass reads it, and the value may hold escapes too. (Behind a key the first pass reads,
          // a value is taken up to its first `&`, which would leave the rest to the decoded pass: a gap
          // of the first pass, not what this test is about.)
          const name = pick(NAMES);
          const hidden = random() < 0.8;
          const key = hidden ? escaped(name.slice(0, -1), 0.3) + escapeChar(name.slice(-1), 1) : name;
          const valueWritten = escaped(value, hidden && random() < 0.5 ? 0.2 : 0);
          secrets.push(value);
          written.push(valueWritten);
          parts.push(pick(KEYS)(key, valueWritten));
        } else parts.push(pick(WORDS));
      }
      const text = parts.join(' ');
      const out = redactSecretsInText(text);
      // Decoded, exactly what the decoded text redacted reads.
      expect(decode(out), text).toBe(redactSecretsInText(decode(text)));
      for (const [token, times] of markup) {
        // A markup token is never inside a secret, so it comes back as written, as often.
        expect(out.split(token).length - 1, `${token} in ${text}`).toBe(times);
      }
      for (const [i, value] of secrets.entries()) {
        expect(out, text).not.toContain(value);
        expect(decode(out), text).not.toContain(value);
        expect(out, text).not.toContain(written[i]!);
      }
      if (out !== text && decode(out) !== out) escapedOnly += 1;
    }
    // Most texts hold an escape the output kept.
    expect(escapedOnly).toBeGreaterThan(2000);
  });
});

describe('through a real tools/call', () => {
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it('an elicitation message keeps its escaped markup while its escaped secret is redacted', async () => {
    const message =
      'Deploy build 7? &lt;!-- reviewers: approve --&gt; runs \\u0060make deploy\\u0060 with \\u0070assword=hunter2';
    const ask = defineTool({
      name: 'ask_deploy',
      description: 'Asks the person whether to deploy.',
      input: {},
      handler: async (_args, ctx) => {
        const answer = await ctx.server.elicit({
          message,
          requestedSchema: { type: 'object', properties: { go: { type: 'boolean' } } },
        });
        return ok({ action: answer.action });
      },
    });
    const asked: ElicitRequest['params'][] = [];
    client = await serveTools([ask], {
      onElicit: (params) => {
        asked.push(params);
        return { action: 'decline' };
      },
    });
    expect(await client.callToolJson('ask_deploy', {})).toEqual({ ok: true, action: 'decline' });
    expect(asked.map((params) => params.message)).toEqual([
      `Deploy build 7? &lt;!-- reviewers: approve --&gt; runs \\u0060make deploy\\u0060 with \\u0070assword=${R}`,
    ]);
    expect(JSON.stringify(asked)).not.toContain('hunter2');
    expect(JSON.stringify(asked)).not.toContain('<!--');
  });

  it("a failure's message keeps its escaped markup while its escaped secret is redacted", async () => {
    const tool = defineTool({
      name: 'fetch_page',
      description: 'Fetches a page from the upstream service.',
      input: {},
      handler: () => {
        throw new ToolError('unavailable', 'Upstream said &lt;b&gt;denied&lt;/b&gt; for \\u0070assword=x');
      },
    });
    client = await serveTools([tool]);
    const result = await client.callTool('fetch_page', {});
    const envelope = expectFailure(result);
    expect(envelope.error).toBe('unavailable');
    expect(envelope.message).toBe(`Upstream said &lt;b&gt;denied&lt;/b&gt; for \\u0070assword=${R}`);
    expect(JSON.stringify(result)).not.toContain('<b>');
  });
});
