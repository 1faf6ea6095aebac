/**
 * Configuration: the environment variables plus the optional YAML file, loaded once, validated,
 * frozen and passed down explicitly. The parts live in src/config/: env.ts and file-schema.ts
 * (the two schemas: names, defaults, checks, types, error wording), build.ts (the runtime
 * values), load.ts (finding and reading the file), types.ts (the Config the program gets).
 */
export { loadConfig, requireMarketplaceSecrets, DEFAULT_FILE_CONFIG, type LoadOptions } from './config/load.js';
export { EnvSchema, ENV_NAMES, type Env, type EnvConfig } from './config/env.js';
export { FileSchema, fileJsonSchema, type FileConfig } from './config/file-schema.js';
export type { Bookmaker, Config, FeedFamily, FeedKind, Marketplace, Plan, Rate, RequestLogMode } from './config/types.js';
