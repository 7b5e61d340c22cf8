import { isIP } from 'node:net';
import { buildConnector } from 'undici';

/** The one origin a connector may dial, and the checked address it dials instead of resolving. */
export interface ConnectionPin {
  readonly protocol: 'https:' | 'http:';
  readonly hostname: string;
  readonly port: number;
  /** A checked address; the socket connects here, whatever DNS says by then. */
  readonly address: string;
}

export interface PinnedConnectorOptions {
  ca?: string | Buffer | (string | Buffer)[] | undefined;
  /** Connect (and TLS handshake) timeout in ms. */
  timeoutMs: number;
}

/**
 * An undici connector pinned to one checked address. Undici hands it the URL's hostname; it dials
 * the pinned address instead, so no second resolution happens (DNS rebinding has nothing to
 * rebind). For https the TLS server name stays the hostname: SNI and the certificate check are
 * against the name that was allowed, not the address. Any other origin is refused: an Agent built
 * for one hop never connects anywhere else.
 */
export function createPinnedConnector(
  pin: ConnectionPin,
  options: PinnedConnectorOptions,
  base: buildConnector.connector = buildConnector({
    timeout: options.timeoutMs,
    ...(options.ca !== undefined && { ca: options.ca }),
  }),
): buildConnector.connector {
  const servername = isIP(pin.hostname) === 0 ? pin.hostname : undefined;
  return (target, callback) => {
    const hostname = target.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
    if (hostname !== pin.hostname || target.protocol !== pin.protocol || port !== pin.port) {
      callback(new Error('toolgate url-allowlist: refused a connection to an unchecked origin'), null);
      return;
    }
    base(
      {
        ...target,
        hostname: pin.address,
        ...(servername !== undefined && { servername }),
      },
      callback,
    );
  };
}
