/**
 * schemas/config.schema.json and schemas/env.schema.json are generated from the schemas in
 * src/config/schema/ and must be current (the service checks its configuration against them);
 * the operators' page's config file validates against the first, and its table of environment
 * variables names every variable of the environment's schema, with its default.
 * (That the page's file is the built-in defaults is checked in test/project/docs.operations.test.ts.)
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { EnvSchema } from '../../src/config/schema/env.js';
import { packageRoot } from '../../src/paths.js';
import { CONFIG_SCHEMA_FILE, configSchemaText, ENV_SCHEMA_FILE, envSchemaText } from '../tools/config-schema.js';

const committed = readFileSync(CONFIG_SCHEMA_FILE, 'utf8');
/** An editor's validator: plain ajv, not knowing the errorMessage annotations. */
const validate = new Ajv({ strict: false }).compile(JSON.parse(committed) as object);

const operations = readFileSync(join(packageRoot(), 'docs', 'operations.md'), 'utf8');
const envTable = operations.slice(operations.indexOf('### Environment variables'), operations.indexOf('### The config file'));

/** The operators' page's config file: the YAML block under "The config file". */
function pageExample(): unknown {
  const block = /```yaml\n([\s\S]*?)```/.exec(operations.slice(operations.indexOf('### The config file')))?.[1];
  expect(block, 'a ```yaml block of the whole config file in docs/operations.md').toBeDefined();
  return parse(block!);
}

describe('schemas/config.schema.json', () => {
  it('is what `npm run schema:config` writes from src/config/schema/file.ts', () => {
    expect(committed, 'stale: run `npm run schema:config`').toBe(configSchemaText());
  });

  it('has schemas/env.schema.json beside it, what `npm run schema:config` writes from src/config/schema/env.ts', () => {
    expect(readFileSync(ENV_SCHEMA_FILE, 'utf8'), 'stale: run `npm run schema:config`').toBe(envSchemaText());
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

describe('the example file of docs/operations.md', () => {
  it('validates against the committed schema', () => {
    expect(validate(pageExample()), JSON.stringify(validate.errors)).toBe(true);
  });
});

describe('the table of environment variables of docs/operations.md', () => {
  const vars = Object.entries(EnvSchema.properties as Record<string, { default?: unknown }>);
  it('has every variable of the environment schema', () => {
    expect(vars.length).toBeGreaterThanOrEqual(15);
    for (const [name] of vars) expect(envTable, name).toContain(`\`${name}\``);
  });
  it.each(vars.filter(([, p]) => p.default !== undefined))('gives the default of %s', (name, p) => {
    expect(envTable).toContain(`\`${name}\` [\`${String(p.default)}\`]`);
  });
});
