#!/usr/bin/env node
// The `oddsfiles-mirror` command: a file that exists before the build, so npm links it at install.
import './dist/bin/oddsfiles-mirror.js';
