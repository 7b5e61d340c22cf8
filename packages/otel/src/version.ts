import { createRequire } from 'node:module';

// Read from package.json (always published) so the instrumentation scope's version never drifts.
const require = createRequire(import.meta.url);

/** The instrumentation scope: this package's name and version. */
export const SCOPE_NAME = '@toolgate/otel';
export const SCOPE_VERSION: string = (require('../package.json') as { version: string }).version;
