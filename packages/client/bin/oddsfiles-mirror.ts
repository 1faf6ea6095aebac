#!/usr/bin/env node
/** `oddsfiles-mirror`: the mirror for consumers who install only @oddsfiles/client. */
import { mirrorCommand } from '../src/mirror/command.js';

const stop = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => stop.abort());
process.exitCode = await mirrorCommand(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
  signal: stop.signal,
});
