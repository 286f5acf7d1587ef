// The README's minimal gateway.yaml is what a newcomer copies first: it must
// pass the same config check `model-gateway check` runs.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfigText } from '../src/config/load.js';
import { builtins } from '../plugins/index.js';
import { familiesOf } from '../src/cli.js';

const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../README.md');

t.test("the README's minimal gateway.yaml passes the config check", async (t) => {
  const text = fs.readFileSync(README, 'utf8');
  const section = text.split('## A minimal gateway.yaml')[1];
  t.ok(section, 'the README has the section');
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section!)?.[1];
  t.ok(yaml, 'the section has a YAML block');
  const config = loadConfigText(yaml!, 'README.md', { families: familiesOf(builtins()), env: {} });
  t.same([...config.providers.keys()], ['openai', 'anthropic']);
  const sonnet = config.models.get('anthropic/claude-sonnet-4-5');
  t.same(sonnet?.fallbacks, ['openai/gpt-4.1-mini'], 'the model-level fallback is read');
});
