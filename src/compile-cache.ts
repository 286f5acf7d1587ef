// V8's compiled code of the gateway's modules, kept on disk between starts.
//
// Most of a start is compiling: the config loader, the schemas, the plugins
// and the server are a few hundred modules, and V8 parses and compiles each
// one before it runs. Node keeps the result in a directory when asked
// (`module.enableCompileCache`), checked against each file's contents and
// Node's own version, so a start after the first loads the compiled code
// instead (docs/performance.md, "Start-up").
//
// Where: NODE_COMPILE_CACHE when set (Node then keeps it from the process's
// first line; NODE_DISABLE_COMPILE_CACHE=1 turns it off), otherwise
// `node_modules/.cache/model-gateway` in the gateway's package. Not the
// system's temporary directory: compiled code is trusted as it is loaded, and
// a directory other users can write to is no place for it. A directory the
// gateway cannot write to is no error: it starts as before.
import module from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package's own cache directory (dist/src/compile-cache.js → the package root). */
export const PACKAGE_COMPILE_CACHE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..', 'node_modules', '.cache', 'model-gateway');

/** Turn the cache on for the modules loaded from now on (a directory it cannot use leaves it off). */
export function enableCompileCache(env: NodeJS.ProcessEnv = process.env): void {
  if (env.NODE_DISABLE_COMPILE_CACHE) return;
  module.enableCompileCache(env.NODE_COMPILE_CACHE || PACKAGE_COMPILE_CACHE);
}

/** Write what was compiled so far (a start's modules), so that the next start finds it even if this process is killed. */
export function flushCompileCache(): void {
  module.flushCompileCache();
}
