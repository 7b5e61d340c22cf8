import { redactSecretsInText } from '@toolgate/core';

// Portable variable names only: `=` or NUL in a name would rewrite another variable.
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const CONTROL = /[\0\n\r]/;

/** The default environment: enough for a program to find its own helpers and speak UTF-8. */
export const DEFAULT_EXEC_ENV: Readonly<Record<string, string>> = Object.freeze({
  PATH: '/usr/bin:/bin',
  LANG: 'C.UTF-8',
});

/**
 * The program's whole environment, built once from an allowlist: the named values, then the named
 * variables of this process that are set. Nothing else is inherited.
 */
export function buildEnvironment(
  env: Readonly<Record<string, string>> | undefined,
  inheritEnv: readonly string[] | undefined,
): Readonly<Record<string, string>> {
  const built: Record<string, string> = Object.create(null);
  for (const [name, text] of Object.entries(env ?? DEFAULT_EXEC_ENV)) {
    checkName(name);
    if (typeof text !== 'string' || CONTROL.test(text)) {
      throw new TypeError(`exec: env.${name} must be a string without NUL bytes or line breaks`);
    }
    built[name] = text;
  }
  for (const name of inheritEnv ?? []) {
    checkName(name);
    const inherited = process.env[name];
    if (inherited === undefined) continue;
    if (CONTROL.test(inherited)) {
      throw new TypeError(`exec: inherited variable ${name} contains a NUL byte or a line break`);
    }
    built[name] = inherited;
  }
  return Object.freeze(built);
}

function checkName(name: unknown): void {
  if (typeof name !== 'string' || !ENV_NAME.test(name)) {
    throw new TypeError(`exec: ${JSON.stringify(name)} is not a valid environment variable name`);
  }
}

/** Names whose values are credentials by convention (`CARRIER_KEY`, `GITHUB_TOKEN`, `PGPASSWORD`, ...). */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASS|CRED|AUTH|PRIVATE|COOKIE|SESSION|DSN/i;
/** Shorter values are left alone: replacing every `1` or `abc` in the output would hide what it says. */
const MIN_SECRET_VALUE = 6;

/**
 * The values of the variables named like credentials, longest first, of the program's environment and
 * of the server's own: a program that prints its own key (an error echoing it, `env`) must not hand
 * it to the model when the value matches none of core's secret patterns (an opaque key), and neither
 * may one that prints the server's (it runs as the server's user, so `/proc/<server pid>/environ` is
 * readable to it). Each also as JSON writes it (`\\` for `\`, `\"` for `"`), the form a program's
 * `--json` output or an env dump carries.
 */
export function secretValuesOf(
  env: Readonly<Record<string, string>>,
  serverEnv: Readonly<Record<string, string | undefined>> = {},
): readonly string[] {
  const values = new Set<string>();
  for (const variables of [env, serverEnv]) {
    for (const [name, value] of Object.entries(variables)) {
      if (value !== undefined && SECRET_NAME.test(name) && value.length >= MIN_SECRET_VALUE) {
        values.add(value);
        values.add(JSON.stringify(value).slice(1, -1));
      }
    }
  }
  return Object.freeze([...values].sort((a, b) => b.length - a.length));
}

/**
 * Every exact value of `secretValues` replaced by `[REDACTED]`, then core's secret patterns. Values go
 * first: a pattern stops at `;`, `&` or a space, and the rest of a value holding one would no longer
 * match exactly.
 */
export function scrubOutput(text: string, secretValues: readonly string[]): string {
  let scrubbed = text;
  for (const value of secretValues) {
    if (scrubbed.includes(value)) scrubbed = scrubbed.replaceAll(value, '[REDACTED]');
  }
  return redactSecretsInText(scrubbed);
}
