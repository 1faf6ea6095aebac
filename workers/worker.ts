#!/usr/bin/env node
/** Runs the worker role alone: the same as `oddsfiles start --roles worker` (one service per role in production). */
import { createCliContext } from '../src/cli/context.js';
import { runCli } from '../src/cli/program.js';

const ctx = createCliContext({ stdout: process.stdout, stderr: process.stderr }, process.env, process.cwd());
process.exitCode = await runCli(ctx, ['start', '--roles', 'worker'], 'role');
