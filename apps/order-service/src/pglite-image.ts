// Run by `pnpm build` after tsc: writes the seeded PGlite image that openDatabase loads (see db.ts).
import { PGLITE_IMAGE, writePgliteImage } from './db.js';

await writePgliteImage();
process.stderr.write(`order-service: wrote ${PGLITE_IMAGE}\n`);
