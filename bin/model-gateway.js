#!/usr/bin/env node
// Thin launcher: the CLI is compiled from src/cli.ts by `npm run build` (run by `prepare`).
import('../dist/src/cli.js').then((m) => m.main(process.argv.slice(2)));
