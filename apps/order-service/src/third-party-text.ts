import { mapStrings, redactSecrets, redactSecretsInText } from '@toolgate/core';
import { scrubErrorText } from '@toolgate/redact-errors';
import type { ServerSecrets } from './server-secrets.js';
import { visibleText } from './visible-text.js';

// Where words the service did not write enter a successful answer (a success passes core's boundary
// unscrubbed, so what a tool returns is what the model reads): the one place they are made safe.

const NO_SECRETS: ServerSecrets = { hide: (text) => text, pattern: undefined };
// Shapes that hold nothing internal, new in every answer (so the scrubber's cache of clean strings,
// which serves the place names and event texts that repeat, never holds them): an ISO 8601 date or
// time stamp, a tracking number. They skip the scrubber's patterns (about 20 µs a new string).
const PLAIN =
  /^(?:\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?|[A-Z]{1,4}\d{6,30})$/;

/**
 * A third party's answer (the carrier's), every string and key of it, as the model may see it: the
 * service's own secret values gone (`secrets`, however each string writes them: escaped, in another
 * case, with invisible characters, fullwidth, base64, hex; one split over two strings is not found), then any
 * credential core's patterns know (also split over sibling strings), then what the service's errors
 * never show either (redact-errors' `scrubErrorText`: hosts and IP addresses with their ports, paths,
 * URLs, connection strings, SQL, stack frames), then control characters and direction overrides
 * written out as visible `\uXXXX` text. Ordinary text (places, dates, times, street addresses, names,
 * e-mail addresses) stays as it is.
 */
export function thirdPartyAnswer<T>(value: T, secrets: ServerSecrets = NO_SECRETS): T {
  const own = mapStrings(value, secrets.hide, { mapKey: secrets.hide });
  const scrub = (text: string): string =>
    PLAIN.test(text) ? text : visibleText(scrubErrorText(text), false);
  return mapStrings(redactSecrets(own), scrub, { mapKey: scrub }) as T;
}

/**
 * A line or name of the operator's own documents: the service's secret values and core's credential
 * patterns redacted, control characters made visible (a line keeps its tabs). Paths, hosts and URLs
 * stay: a policy may name a returns address or its own web page. search_docs hides the service's
 * secrets in a whole document before searching it and redacts a line before cutting it, so a line's
 * excerpt comes here with `secrets` already applied.
 */
export function documentText(text: string, keepTab: boolean, secrets: ServerSecrets = NO_SECRETS): string {
  return visibleText(redactSecretsInText(secrets.hide(text)), keepTab);
}
