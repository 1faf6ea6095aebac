/**
 * Configuration: the environment variables plus the optional YAML file, loaded once, validated,
 * frozen and passed down explicitly. The parts live in src/config/: schema/ (the two schemas:
 * names, defaults, checks, types, error wording; the JSON schemas in schemas/ are generated from
 * them), env.ts and file-config.ts (checking against those JSON schemas), build.ts (the runtime
 * values), load.ts (finding and reading the file), types.ts (the Config the program gets).
 */
export { loadConfig, requireMarketplaceSecrets, DEFAULT_FILE_CONFIG, type LoadOptions } from './config/load.js';
export { ENV_NAMES, type Env, type EnvConfig } from './config/env.js';
export type { FileConfig } from './config/file-config.js';
export type { Bookmaker, Config, FeedFamily, FeedKind, Marketplace, Plan, Rate, RequestLogMode } from './config/types.js';
