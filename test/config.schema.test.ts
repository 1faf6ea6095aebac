/**
 * schemas/config.schema.json is generated from the config file's schema (src/config/file-schema.ts)
 * and must be current; the README's annotated file is the built-in defaults, and validates; the
 * README's table of environment variables gives the schema's defaults.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DEFAULT_FILE_CONFIG, EnvSchema } from '../src/config.js';
import { packageRoot } from '../src/paths.js';
import { CONFIG_SCHEMA_FILE, configSchemaText } from './tools/config-schema.js';

const committed = readFileSync(CONFIG_SCHEMA_FILE, 'utf8');
/** An editor's validator: plain ajv, not knowing the errorMessage annotations. */
const validate = new Ajv({ strict: false }).compile(JSON.parse(committed) as object);

const readme = readFileSync(join(packageRoot(), 'README.md'), 'utf8');

/** The README's annotated config file: its YAML block that starts with `bookmakers:`. */
function readmeExample(): unknown {
  const block = /```yaml\n(bookmakers:[\s\S]*?)```/.exec(readme)?.[1];
  expect(block, 'a ```yaml block of the whole config file in the README').toBeDefined();
  return parse(block!);
}

describe('schemas/config.schema.json', () => {
  it('is what `npm run schema:config` writes from src/config/file-schema.ts', () => {
    expect(committed, 'stale: run `npm run schema:config`').toBe(configSchemaText());
  });

  it('lets a file leave out any setting that has a default', () => {
    expect(validate({})).toBe(true);
    expect(validate({ ingest: { poll: '1s' }, reader: {} })).toBe(true);
  });

  it('still refuses what the service refuses', () => {
    expect(validate({ colour: 'blue' })).toBe(false);
    expect(validate({ limits: { future_skew: '5 minutes' } })).toBe(false);
    expect(validate({ marketplaces: [{ name: 'm', secret_header: 'X-S', user_header: 'X-U', plan_header: 'X-P', plans: {} }] })).toBe(false);
  });
});

describe('the README example file', () => {
  it('is the built-in defaults', () => {
    expect(readmeExample()).toEqual(DEFAULT_FILE_CONFIG);
  });

  it('validates against the committed schema', () => {
    expect(validate(readmeExample()), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('the README table of environment variables', () => {
  const defaults = Object.entries(EnvSchema.properties as Record<string, { default?: unknown }>).filter(([, p]) => p.default !== undefined);
  it.each(defaults)('gives the default of %s', (name, p) => {
    expect(readme).toContain(`\`${name}\` [\`${String(p.default)}\`]`);
  });
});
