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
