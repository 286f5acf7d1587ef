// The usage dashboard (issue 19, section 5) in headless Chromium: a gateway
// with a SQLite usage store serves real requests made with the official
// openai client (one of them fails); the page, opened with the admin key,
// shows their numbers, the model names and the failed request's id; an empty
// store shows the empty state, a wrong key the refusal. A screenshot is taken.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import OpenAI from 'openai';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startOpenAIMock } from './mocks/openai.js';
import { startGateway, CLIENT_KEY, until, type TestGateway } from './helpers/gateway.js';

const CHROMIUM = '/usr/bin/chromium';
const ADMIN_KEY = 'gw-admin-key-' + randomBytes(8).toString('hex');
const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const nf = new Intl.NumberFormat('en-US');

const oai = await startOpenAIMock();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gw-dashboard-'));
t.teardown(async () => {
  await oai.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

function config(db: string | null): string {
  return `
admin_keys:
  - { name: ops, sha256: ${sha(ADMIN_KEY)} }
providers:
  - { name: openai, family: openai, base_url: ${oai.url}/v1, api_key: sk-test-openai-0123456789, retries: 0, timeout_ms: 2000 }
routing: { max_retry_wait_ms: 100 }
models:
  - id: openai/gpt-4.1-mini
    deployments: [{ provider: openai, model: gpt-4.1-mini }]
    pricing: { input: 0.40, cached_input: 0.10, output: 1.60 }
  - id: openai/gpt-5-mini
    capabilities: { reasoning: true }
    deployments: [{ provider: openai, model: gpt-5-mini }]
    pricing: { input: 0.25, cached_input: 0.025, output: 2.00 }
${db ? `storage:\n  usage: { db: ${db}, flush_ms: 20 }` : ''}`;
}

async function gateway(name: string): Promise<TestGateway> {
  return startGateway(config(path.join(dir, `${name}.db`)), {}, 'test-gateway.yaml', { usageStore: true });
}

t.test('the page and its files are served without a key, with a strict policy', async (t) => {
  const gw = await startGateway(config(null));
  t.teardown(() => gw.close());
  const page = await fetch(`${gw.url}/dashboard`);
  t.equal(page.status, 200);
  t.match(page.headers.get('content-type'), /^text\/html/);
  const csp = page.headers.get('content-security-policy') ?? '';
  t.match(csp, /script-src 'self'/, 'scripts from the gateway only');
  t.match(csp, /form-action 'none'/, 'no form submission can carry the key');
  t.match(csp, /connect-src 'self'/);
  t.equal(page.headers.get('x-frame-options'), 'DENY');
  const html = await page.text();
  t.notMatch(html, /https?:\/\//, 'nothing loaded from another site');
  for (const [file, type] of [
    ['app.js', /^text\/javascript/],
    ['app.css', /^text\/css/],
    ['uplot.min.js', /^text\/javascript/],
    ['uplot.min.css', /^text\/css/],
  ] as const) {
    t.match(html, `dashboard/${file}`, `the page loads ${file}`);
    const res = await fetch(`${gw.url}/dashboard/${file}`);
    t.equal(res.status, 200, `${file} is served`);
    t.match(res.headers.get('content-type'), type);
    t.equal(res.headers.get('x-content-type-options'), 'nosniff');
    t.ok((await res.arrayBuffer()).byteLength > 1000, `${file} has content`);
  }
  t.match(await (await fetch(`${gw.url}/dashboard/uplot.min.js`)).text(), /uPlot/, 'uPlot, from node_modules');
  const slash = await fetch(`${gw.url}/dashboard/`, { redirect: 'manual' });
  t.equal(slash.status, 308, '/dashboard/ redirects to /dashboard (the page links relative to it)');
  t.equal(new URL(slash.headers.get('location')!, `${gw.url}/dashboard/`).pathname, '/dashboard');
  const other = await fetch(`${gw.url}/dashboard/nope.js`);
  t.equal(other.status, 404, 'nothing else under /dashboard');
  // The data needs the key: the page alone holds none.
  t.equal((await fetch(`${gw.url}/admin/usage`)).status, 401);
});

const skip = fs.existsSync(CHROMIUM) ? false : `Chromium is not installed (${CHROMIUM}; on Debian: apt-get install chromium): the dashboard was not tested in a browser`;

let browser: Browser | undefined;
async function openPage(t: Test, gw: TestGateway): Promise<{ page: Page; problems: string[] }> {
  browser ??= await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-component-update', '--disable-sync'],
  });
  const context = await browser.newContext({ locale: 'en-US', viewport: { width: 1280, height: 900 } });
  t.teardown(() => context.close());
  const page = await context.newPage();
  // Script errors and policy violations; a refused key's 401 is the browser's own console line, expected.
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[13]/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  await page.goto(`${gw.url}/dashboard`);
  return { page, problems };
}

async function signIn(page: Page, key: string): Promise<void> {
  await page.getByLabel('Admin key').fill(key);
  await page.getByRole('button', { name: 'Open the dashboard' }).click();
}

const text = (page: Page, selector: string) => page.locator(selector).innerText();

/** The rows of a table, each as its cells' text. */
async function rows(page: Page, selector: string): Promise<string[][]> {
  return page.locator(`${selector} tbody tr`).evaluateAll((trs) => trs.map((tr) => [...tr.children].map((c) => (c as any).textContent.trim())));
}

t.test('with real requests: the numbers, the models, the failed request', { skip }, async (t) => {
  const gw = await gateway('busy');
  t.teardown(() => gw.close());
  const client = (user: string) => new OpenAI({ apiKey: CLIENT_KEY, baseURL: gw.baseURL, maxRetries: 0, defaultHeaders: { 'x-gateway-user-id': user } });
  const a = client('alice');
  const b = client('bob');
  let input = 0;
  let output = 0;
  for (const [c, model] of [
    [a, 'openai/gpt-4.1-mini'],
    [a, 'openai/gpt-4.1-mini'],
    [b, 'openai/gpt-5-mini'],
  ] as const) {
    const r = await c.chat.completions.create({ model, messages: [{ role: 'user', content: `hello ${model}` }] });
    input += r.usage!.prompt_tokens;
    output += r.usage!.completion_tokens;
  }
  const stream = await a.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'stream it' }], stream: true, stream_options: { include_usage: true } });
  for await (const c of stream) {
    if (c.usage) {
      input += c.usage.prompt_tokens;
      output += c.usage.completion_tokens;
    }
  }
  oai.fail({ status: 500 });
  const failed = await b.chat.completions.create({ model: 'openai/gpt-4.1-mini', messages: [{ role: 'user', content: 'this one fails' }] }).catch((e) => e);
  t.ok(failed instanceof OpenAI.APIError && failed.status >= 500, `the upstream failure answers ${failed.status}`);
  const failedId = failed.headers.get('x-request-id') as string;
  t.ok(failedId, 'the failed request has an id');
  // The records are written when the store's batch is flushed.
  await until(() => gw.records.length >= 5, 5000);
  await gw.gw.usage!.flush();
  t.equal(gw.gw.usage!.stats.written, 5, 'five records in the store');

  const { page, problems } = await openPage(t, gw);
  await signIn(page, ADMIN_KEY);
  await page.locator('#content').waitFor({ state: 'visible' });
  t.equal(await page.evaluate(() => (globalThis as any).document.activeElement?.id), 'board-title', 'the focus moves from the gone form to the board');
  t.equal(await text(page, '[data-total=requests]'), '5', 'five requests');
  t.equal(await text(page, '[data-total=errors]'), '1 (20.0%)', 'one error');
  t.equal(await text(page, '[data-total=input_tokens]'), nf.format(input), 'the input tokens the client was told');
  t.equal(await text(page, '[data-total=output_tokens]'), nf.format(output), 'the output tokens the client was told');
  t.match(await text(page, '[data-total=cost_usd]'), /^\$\d/, 'a cost');
  t.match(await text(page, '[data-total=latency]'), /^\d[\d,]* ms \/ \d[\d,]* ms$/, 'latency percentiles');
  t.match(await text(page, '[data-total=ttfb]'), /^\d[\d,]* ms \/ \d[\d,]* ms$/, 'time-to-first-byte percentiles');

  const byModel = await rows(page, '#table-groups');
  t.same(
    byModel.map((r) => r.slice(0, 3)),
    [
      ['openai/gpt-4.1-mini', '4', '1'],
      ['openai/gpt-5-mini', '1', '0'],
    ],
    'requests and errors by model',
  );
  const errs = await rows(page, '#table-errors');
  t.equal(errs.length, 1, 'one failed request listed');
  t.equal(errs[0][0], failedId, "the failed request's id");
  t.equal(errs[0][2], String(failed.status));
  t.equal(errs[0][5], 'openai/gpt-4.1-mini');
  t.equal(errs[0][8], 'bob');

  // The chart's table fallback adds up to the requests, and the chart drew something.
  const overTime = await rows(page, '#table-usage');
  t.equal(
    overTime.reduce((n, r) => n + r.slice(1).reduce((m, c) => m + Number(c.replace(/,/g, '')), 0), 0),
    5,
    "the over-time table's buckets add up to the requests",
  );
  t.match(await page.locator('#chart-usage').getAttribute('aria-label'), /Requests by model/, 'the chart is labelled');
  const painted = await page.locator('#chart-usage canvas').evaluate((c: any) => {
    const px = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
    return n;
  });
  t.ok(painted > 500, `the usage chart is drawn (${painted} pixels)`);
  t.ok(await page.locator('#chart-latency canvas').count(), 'a latency chart');

  // By user, and errors over time.
  await page.getByLabel('Group by', { exact: true }).selectOption('user');
  await page.getByRole('heading', { name: 'By user', exact: true }).waitFor();
  t.same(
    (await rows(page, '#table-groups')).map((r) => r.slice(0, 3)),
    [
      ['alice', '3', '0'],
      ['bob', '2', '1'],
    ],
    'requests and errors by user',
  );
  await page.getByLabel('Chart', { exact: true }).selectOption('errors');
  await page.getByRole('heading', { name: /^Errors by user/ }).waitFor();
  const errorsOverTime = await rows(page, '#table-usage');
  const head = await page.locator('#table-usage thead th').allTextContents();
  const bobCol = head.indexOf('bob');
  t.ok(bobCol > 0, "bob's errors have a column");
  t.equal(errorsOverTime.reduce((n, r) => n + Number(r[bobCol]), 0), 1, "bob's one error, over time");

  // Screenshot, under the test's temp dir.
  const shot = path.join(dir, 'dashboard.png');
  await page.getByLabel('Chart', { exact: true }).selectOption('requests');
  await page.getByRole('heading', { name: /^Requests by user/ }).waitFor();
  await page.screenshot({ path: shot, fullPage: true });
  const png = fs.readFileSync(shot);
  t.same([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG');
  t.equal(png.readUInt32BE(16), 1280, 'as wide as the window');
  t.ok(png.readUInt32BE(20) >= 900, 'the whole page');
  t.ok(png.length > 30_000, `not a blank image (${png.length} bytes)`);

  // The key: in this tab's session storage, never in the address or a log line.
  t.notMatch(page.url(), ADMIN_KEY);
  t.equal(await page.evaluate(() => sessionStorage.getItem('model-gateway-admin-key')), ADMIN_KEY);
  await page.reload();
  await page.locator('#content').waitFor({ state: 'visible' });
  t.equal(await text(page, '[data-total=requests]'), '5', 'a reload keeps the key for the tab');
  t.notOk(gw.rawLogs.some((l) => l.includes(ADMIN_KEY)), 'the admin key is in no log line');
  t.ok(gw.logs.some((l) => l.path === '/admin/usage' && l.admin_key === 'ops'), 'the API calls are logged under the admin key name');
  await page.getByRole('button', { name: 'Forget the admin key' }).click();
  await page.getByLabel('Admin key').waitFor();
  t.equal(await page.evaluate(() => sessionStorage.getItem('model-gateway-admin-key')), null, 'forgotten');
  t.same(problems, [], 'no script error, no policy violation');
});

t.test('an empty store shows the empty state; a wrong key the refusal', { skip }, async (t) => {
  const gw = await gateway('empty');
  t.teardown(() => gw.close());
  const { page, problems } = await openPage(t, gw);

  await signIn(page, 'not-the-admin-key');
  await page.locator('#login-error').getByText(/refused/).waitFor();
  t.match(await text(page, '#login-error'), /refused this admin key \(401\): Invalid admin key/);
  t.ok(await page.locator('#board').isHidden(), 'no dashboard');
  t.equal(await page.evaluate(() => sessionStorage.getItem('model-gateway-admin-key')), null, 'a refused key is not kept');

  await signIn(page, CLIENT_KEY);
  await page.locator('#login-error').getByText(/403/).waitFor();
  t.match(await text(page, '#login-error'), /This is a client key/, 'a client key is told it is one');

  await signIn(page, ADMIN_KEY);
  await page.locator('#empty').waitFor({ state: 'visible' });
  t.equal(await text(page, '#empty h2'), 'No requests yet');
  t.match(await text(page, '#empty-text'), /recorded no request between/);
  t.ok(await page.locator('#content').isHidden(), 'no charts or tables');
  t.ok(await page.locator('#failure').isHidden(), 'not an error');
  t.ok(await page.locator('#login-error').isHidden(), 'the refusal is gone');
  t.same(problems, [], 'no script error, no policy violation');

  // A key kept by the tab that the gateway no longer accepts (removed from admin_keys): asked again.
  await page.evaluate(() => sessionStorage.setItem('model-gateway-admin-key', 'a-key-since-removed'));
  await page.reload();
  await page.locator('#login-error').getByText(/refused/).waitFor();
  t.ok(await page.locator('#board').isHidden(), 'no dashboard with a stale key');
  t.equal(await page.evaluate(() => sessionStorage.getItem('model-gateway-admin-key')), null, 'the stale key is dropped');
});

t.test('a gateway without its usage store says so', { skip }, async (t) => {
  const gw = await startGateway(config(null));
  t.teardown(() => gw.close());
  const { page } = await openPage(t, gw);
  await signIn(page, ADMIN_KEY);
  await page.locator('#failure').waitFor({ state: 'visible' });
  t.match(await text(page, '#failure'), /The usage store is not available/);
});

t.teardown(() => browser?.close());
