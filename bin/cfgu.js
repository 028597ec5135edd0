#!/usr/bin/env node
// The cfgu command. The application is bundled into dist/cli.js by `npm run build` (also run by `npm ci`).
import '../dist/cli.js';
