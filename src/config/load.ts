/**
 * Loading the configuration: the environment (env.ts) plus the optional YAML file
 * (file-config.ts), checked, built into the runtime Config (build.ts) and frozen. It is loaded
 * once and passed down explicitly; nothing else in the project reads process.env.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { ConfigError } from '../errors.js';
import { buildConfig } from './build.js';
import { parseEnv, type Env } from './env.js';
import { parseFileConfig, type FileConfig } from './file-config.js';
import type { Config } from './types.js';

export interface LoadOptions {
  env?: Env;
  cwd?: string;
  /**
   * A marketplace whose `secret_env` is not set loads with no secret instead of failing: for the
   * commands that serve no marketplace traffic (every one but a reader), so that `keys list` or a
   * worker does not need the reader's secret. The reader refuses such a configuration
   * (requireMarketplaceSecrets).
   */
  optionalSecrets?: boolean;
}

/** The file's built-in defaults (what an empty file gives), frozen. */
export const DEFAULT_FILE_CONFIG: FileConfig = deepFreeze(parseFileConfig({}, undefined));

/** Load, validate and freeze the configuration. Throws ConfigError naming the file and path. */
export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const cwd = options.cwd ?? process.cwd();
  const vars = parseEnv(env);
  const configFile = findConfigFile(vars.ODDSFILES_CONFIG, cwd);
  const file = parseFileConfig(configFile ? readConfigFile(configFile) : {}, configFile);
  return deepFreeze(buildConfig({ vars, env, cwd, file, configFile, optionalSecrets: options.optionalSecrets ?? false }));
}

/** Throws the ConfigError of the first marketplace loaded without its secret (optionalSecrets). */
export function requireMarketplaceSecrets(config: Config): void {
  for (const m of config.marketplaces)
    if (m.secret === undefined) throw m.missingSecret ?? new ConfigError(config.configFile, 'marketplaces', `${m.name}: no secret`);
}

/** ODDSFILES_CONFIG (which must exist), else ./oddsfiles.yaml when there is one. */
function findConfigFile(explicit: string | undefined, cwd: string): string | undefined {
  if (explicit !== undefined) {
    const path = resolve(cwd, explicit);
    if (!existsSync(path)) throw new ConfigError(path, '', 'file not found (ODDSFILES_CONFIG)');
    return path;
  }
  const fallback = resolve(cwd, 'oddsfiles.yaml');
  return existsSync(fallback) ? fallback : undefined;
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, '', `cannot read: ${(err as Error).message}`);
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const line = e.linePos?.[0];
    // The first line of a yaml error repeats the position ("… at line 4, column 1:"): it is in the path already.
    const problem = e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '');
    throw new ConfigError(path, line ? `line ${line.line}, column ${line.col}` : '', problem);
  }
  const value: unknown = doc.toJS();
  if (value === null || value === undefined) return {};
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new ConfigError(path, '', 'must be a mapping (key: value) at the top level');
  }
  return value as Record<string, unknown>;
}

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
