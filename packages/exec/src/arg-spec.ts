// A registry symbol: tagged values must be made by value()/option() (of any copy of this package);
// arguments arrive as JSON, which cannot carry a symbol, so the model cannot forge one.
const ARG_VALUE_BRAND = Symbol.for('toolgate.exec.ArgValue');

// A long or short option name: `--output`, `-o`. No `=`, no spaces, nothing a value could smuggle.
const FLAG = /^(?:--[A-Za-z0-9][A-Za-z0-9._-]*|-[A-Za-z0-9])$/;

/** What may stand for a model value: text or a number (numbers are written in decimal). */
export type ArgText = string | number | bigint;

export interface ValueOptions {
  /** This position takes values starting with `-` (a negative number, say). @default false */
  allowDash?: boolean;
}

export interface OptionOptions extends ValueOptions {
  /** One element (`--limit=5`, `-n5`) instead of two (`--limit`, `5`). @default false */
  inline?: boolean;
}

/** A value that came from the model, tagged so the argv check knows it is data, not the declaration's. */
export interface ArgValue {
  readonly [ARG_VALUE_BRAND]: true;
  /** The option that takes this value, when made by `option()`. */
  readonly flag: string | undefined;
  /** The value, as passed to the program. */
  readonly text: string;
  readonly allowDash: boolean;
  readonly inline: boolean;
}

/** One argv element of a declaration: a fixed string of the declaration, or a tagged model value. */
export type ArgSpec = string | ArgValue;

/** An argv entry as a declaration may return it: skipped when false, null or undefined. */
export type ArgEntry = ArgSpec | false | null | undefined;

/**
 * A positional value from the model. Refused when it starts with `-` (it would read as an option)
 * unless it comes after a fixed `--` or `allowDash` says this position takes one.
 */
export function value(text: ArgText, options: ValueOptions = {}): ArgValue {
  return makeArgValue(undefined, text, options.allowDash === true, false);
}

/**
 * An option with a value from the model: `option('--limit', input.limit)` gives `--limit`, `5`
 * (or `--limit=5` with `inline`). The flag is the declaration's and must look like one; the value
 * follows the same rule as `value()`.
 */
export function option(flag: string, text: ArgText, options: OptionOptions = {}): ArgValue {
  if (typeof flag !== 'string' || !FLAG.test(flag)) {
    throw new TypeError(
      `option(): ${JSON.stringify(flag)} is not an option name; use a fixed "--name" or "-x" from the declaration`,
    );
  }
  return makeArgValue(flag, text, options.allowDash === true, options.inline === true);
}

/** True for values made by `value()` or `option()`. */
export function isArgValue(candidate: unknown): candidate is ArgValue {
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    (candidate as Record<symbol, unknown>)[ARG_VALUE_BRAND] === true
  );
}

function makeArgValue(
  flag: string | undefined,
  text: ArgText,
  allowDash: boolean,
  inline: boolean,
): ArgValue {
  if (typeof text !== 'string' && typeof text !== 'number' && typeof text !== 'bigint') {
    throw new TypeError(
      `value(): expected a string or a number, got ${text === null ? 'null' : typeof text}`,
    );
  }
  if (typeof text === 'number' && !Number.isFinite(text)) {
    throw new TypeError(`value(): ${text} is not a finite number`);
  }
  return Object.freeze({ [ARG_VALUE_BRAND]: true as const, flag, text: String(text), allowDash, inline });
}
