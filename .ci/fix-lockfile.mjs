#!/usr/bin/env node
// npm here cannot fetch the non-Linux builds of msgpackr-extract (an optional dependency of
// bullmq's msgpackr), so `npm install` leaves them out of package-lock.json and `npm ci` then
// refuses the lock as out of sync. This adds their entries (os/cpu-filtered, so never installed
// on Linux x64). Run it after every `npm install` that rewrites the lock.
import { readFileSync, writeFileSync } from 'node:fs';

const path = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(path, 'utf8'));
const pkgs = lock.packages;
const parent = pkgs['node_modules/msgpackr-extract'];
const ref = pkgs['node_modules/@msgpackr-extract/msgpackr-extract-linux-x64'];
if (!parent || !ref) process.exit(0);
let added = 0;
for (const name of Object.keys(parent.optionalDependencies ?? {})) {
  const key = `node_modules/${name}`;
  if (pkgs[key]) continue;
  const [, os, cpu] = /msgpackr-extract-(\w+)-(\w+)$/.exec(name) ?? [];
  const { integrity: _i, resolved: _r, ...rest } = ref;
  pkgs[key] = { ...rest, version: parent.optionalDependencies[name], os: [os], cpu: [cpu] };
  added++;
}
lock.packages = Object.fromEntries(Object.entries(pkgs).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : a > b ? 1 : 0)));
writeFileSync(path, `${JSON.stringify(lock, null, 2)}\n`);
console.log(`fix-lockfile: added ${added} entries`);
