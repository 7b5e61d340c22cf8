// Checks each packed tarball's package.json as the registry would receive it.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
const RUNTIME_MUST_BE_RANGES = ['undici', 'lru-cache', 'opossum', 'ipaddr.js', 'tldts'];
const problems = [];
for (const file of readdirSync(dir).filter((name) => name.endsWith('.tgz'))) {
  const tarball = join(dir, file);
  const manifest = JSON.parse(
    execFileSync('tar', ['-xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }),
  );
  const listing = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n');
  const where = `${manifest.name} (${file})`;
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies']) {
    for (const [name, range] of Object.entries(manifest[field] ?? {})) {
      if (/^(catalog|workspace):/.test(range)) problems.push(`${where}: ${field}.${name} is still ${range}`);
      if (field === 'dependencies' && /^\d/.test(range))
        problems.push(`${where}: dependencies.${name} is the exact version ${range}; publish a range`);
      if (field === 'dependencies' && name.startsWith('@types/'))
        problems.push(`${where}: ${name} is a runtime dependency; no published .d.ts needs it`);
    }
  }
  for (const name of RUNTIME_MUST_BE_RANGES) {
    const range = manifest.dependencies?.[name];
    if (range !== undefined && !/^[\^~]/.test(range))
      problems.push(`${where}: ${name} ${range} is not a range`);
  }
  if (!listing.includes('package/LICENSE')) problems.push(`${where}: no LICENSE in the tarball`);
  if (!listing.includes('package/dist/index.js'))
    problems.push(`${where}: no dist/index.js (did prepack build?)`);
  if (manifest.license !== 'MIT') problems.push(`${where}: license is ${manifest.license}`);
  if (manifest.type !== 'module') problems.push(`${where}: not "type": "module"`);
  console.log(`${where}: deps ${JSON.stringify(manifest.dependencies ?? {})}`);
}
if (problems.length > 0) {
  console.error(`\n${problems.length} problem(s):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('tarballs: ok');
