#!/usr/bin/env node
/** Entry point of the `oddsfiles` command. A composition root: nothing imports it. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createCliContext } from '../src/cli/context.js';
import { runCli } from '../src/cli/program.js';
import { packageRoot } from '../src/paths.js';

const { version } = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
const ctx = createCliContext({ stdout: process.stdout, stderr: process.stderr }, process.env, process.cwd());
const code = await runCli(ctx, process.argv.slice(2), version);
process.exitCode = code;
// Lingering handles (a Redis reconnect timer) must not keep a finished command alive.
setTimeout(() => process.exit(code), 200).unref();
