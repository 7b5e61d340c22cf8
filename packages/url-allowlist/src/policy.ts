import { checkUrl } from './check-url.js';
import { fetchUrl } from './fetch-url.js';
import { normalisePolicyOptions } from './options.js';
import { isUrlRefusedError } from './refusal.js';
import type { CheckedUrl, UrlFetchInit, UrlFetchResult, UrlPolicy, UrlPolicyOptions } from './types.js';

/**
 * Creates a URL policy. Options are normalised (and malformed allowlist entries refused) here,
 * once. `check` and `fetch` reject with a `ToolError` the model can act on; a handler may simply
 * let it propagate (core turns it into the matching `fail()` result).
 */
export function createUrlPolicy(options: UrlPolicyOptions): UrlPolicy {
  const policy = normalisePolicyOptions(options);
  // Only CheckedUrls this policy made skip resolution in fetch, and fetch uses the copy of what was
  // checked kept under this policy's own symbol (a caller mutating `checked.url` cannot steer it;
  // a look-alike object without the copy is checked again).
  const issued = Symbol('url-allowlist.checked');
  const check = async (url: string | URL, signal?: AbortSignal): Promise<CheckedUrl> => {
    try {
      const checked = await checkUrl(policy, url, signal);
      const snapshot = { hostname: checked.hostname, port: checked.port, addresses: checked.addresses };
      Object.defineProperty(checked, issued, { value: { ...snapshot, href: checked.url.href } });
      return Object.freeze(checked);
    } catch (error) {
      if (isUrlRefusedError(error)) {
        policy.logger.info(
          { reason: error.reason, host: error.host, ...error.detail },
          'url-allowlist: refused',
        );
      }
      throw error;
    }
  };
  return {
    check: (url, checkOptions) => check(url, checkOptions?.signal),
    fetch(url: string | URL | CheckedUrl, init: UrlFetchInit = {}): Promise<UrlFetchResult> {
      return fetchUrl(policy, check, targetOf(url, issued), init);
    },
  };
}

interface Snapshot extends Omit<CheckedUrl, 'url'> {
  readonly href: string;
}

function targetOf(url: string | URL | CheckedUrl, issued: symbol): string | URL | CheckedUrl {
  if (typeof url !== 'object' || url instanceof URL) return url;
  const snapshot = (url as unknown as Record<symbol, Snapshot | undefined>)[issued];
  if (snapshot) return { ...snapshot, url: new URL(snapshot.href) };
  // A look-alike is checked again by its `url`. Only a string or URL can be: any other object there
  // (a look-alike nested inside) would reach fetch as if checked, so it becomes '' and is refused.
  const inner: unknown = url.url;
  return typeof inner === 'string' || inner instanceof URL ? inner : '';
}
