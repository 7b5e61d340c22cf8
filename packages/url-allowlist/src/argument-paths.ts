/** One value found at a declared argument path, with its concrete path (`links[2].href`). */
export interface FoundArgument {
  readonly path: string;
  readonly value: unknown;
}

interface Segment {
  readonly key: string;
  readonly each: boolean;
}

const SEGMENT = /^([A-Za-z0-9_$-]+)(\[\])?$/;

/**
 * Parses a declared path: `url`, `target.url`, `urls[]`, `links[].href`. `[]` means every element
 * of an array. Throws on anything else, at middleware creation.
 */
export function parseArgumentPath(path: string): readonly Segment[] {
  if (typeof path !== 'string' || path === '') throw new TypeError('a path must be a non-empty string');
  return path.split('.').map((part) => {
    const match = SEGMENT.exec(part);
    if (!match) throw new TypeError(`"${path}" is not a path like url, target.url or links[].href`);
    return { key: match[1]!, each: match[2] !== undefined };
  });
}

/**
 * Every value at a path. A missing key yields nothing (the input schema decides what is required);
 * a present value of the wrong shape (not an array where `[]` is declared) is yielded as-is, so
 * the caller refuses it rather than skipping it.
 */
export function findArguments(args: unknown, segments: readonly Segment[]): FoundArgument[] {
  const found: FoundArgument[] = [];
  const walk = (value: unknown, index: number, path: string): void => {
    if (index === segments.length) {
      found.push({ path, value });
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      found.push({ path, value });
      return;
    }
    const segment = segments[index]!;
    if (!Object.hasOwn(value, segment.key)) return;
    const child = (value as Record<string, unknown>)[segment.key];
    const childPath = path === '' ? segment.key : `${path}.${segment.key}`;
    if (child === undefined || child === null) return;
    if (!segment.each) {
      walk(child, index + 1, childPath);
      return;
    }
    if (!Array.isArray(child)) {
      found.push({ path: childPath, value: child });
      return;
    }
    child.forEach((element, position) => {
      walk(element, index + 1, `${childPath}[${position}]`);
    });
  };
  walk(args, 0, '');
  return found;
}
