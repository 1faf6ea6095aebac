import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

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
