import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * The package's root folder (the one holding package.json and schemas/), found from this file's
 * place whether it runs from src/ (tests) or dist/src/ (the built command).
 */
export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  let dir = dirname(from);
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'schemas'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`oddsfiles: cannot find the package root above ${from}`);
    dir = parent;
  }
}

export function schemaPath(name: string): string {
  return join(packageRoot(), 'schemas', name);
}

/**
 * The built script of a worker thread (`src/…/name.js` under dist/): beside the calling module when
 * it runs built, else (tests run src/ through a TypeScript loader that threads do not inherit) the
 * one `npm run build` wrote.
 */
export function workerScript(callerUrl: string, relative: string): URL {
  const caller = fileURLToPath(callerUrl);
  if (caller.endsWith('.js')) return new URL(relative, callerUrl);
  const fromSrc = caller.slice(join(packageRoot(caller), 'src').length + 1);
  return new URL(relative, pathToFileURL(join(packageRoot(caller), 'dist', 'src', fromSrc.replace(/\.ts$/, '.js'))));
}
