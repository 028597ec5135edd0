// Build step (run by scripts/build.mjs): the library bundle loaded once into every sandbox isolate.
// lodash, validator, zod, chai, ajv (+ formats), the template parser, the coercion rules and the in-isolate runtime
// become one classic script, dist/sandbox/libraries.js, with no imports and no host globals.
import { build } from 'esbuild';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

export default async function buildSandbox({ root }) {
  const outdir = join(root, 'dist', 'sandbox');
  mkdirSync(outdir, { recursive: true });
  await build({
    entryPoints: [join(root, 'src/expressions/isolate/runtime.ts')],
    outfile: join(outdir, 'libraries.js'),
    bundle: true,
    format: 'iife',
    platform: 'neutral',
    mainFields: ['module', 'main'],
    conditions: ['import', 'default'],
    target: 'es2022',
    minify: false,
    legalComments: 'none',
    // The whole bundle is strict code: V8 hides a strict caller from `fn.caller` / `fn.arguments`, so a sloppy
    // function an expression makes (with `Function(...)`) and hands to a library or to the runtime (a getter, a
    // toString, a callback) cannot climb to the library's or runtime's frames and their arguments.
    banner: { js: '"use strict";' },
    define: { 'process.env.NODE_ENV': '"production"', global: 'globalThis' },
    logLevel: 'warning',
  });
}
