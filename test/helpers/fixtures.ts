// Recorded real traffic lives in a `shared/fixtures` folder beside the project
// checkout (reference material, never copied into the project). A replay test
// asks here where it is, and skips with a message a user can act on where it
// is absent (a fresh clone has none).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root: tests run compiled from dist/test/, two levels below it. */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

export interface SharedFixtures {
  /** Absolute path of the recordings' folder. */
  dir: string;
  /** false where the folder exists, else the reason the replay is skipped. */
  skip: false | string;
}

/** Where the recordings of one kind are (`anthropic`, `gemini`, …) and, if absent, why the replay skips. */
export function sharedFixtures(kind: string, file?: string): SharedFixtures {
  const dir = path.resolve(ROOT, '..', 'shared', 'fixtures', kind);
  const target = file ? path.join(dir, file) : dir;
  return {
    dir,
    skip: fs.existsSync(target)
      ? false
      : `no recorded ${kind} traffic here: this replay runs where the shared reference folder sits beside the project checkout (../shared/fixtures/${kind}${file ? `/${file}` : ''})`,
  };
}
