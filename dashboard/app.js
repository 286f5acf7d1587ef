// The usage dashboard (docs/observability.md, "Dashboard"). Plain script, no
// build step: it reads the admin API of the gateway that served it with the
// admin key the user typed, kept in this tab's sessionStorage only and sent as
// `Authorization: Bearer`, never in an address. Every value from the API is
// written as text (textContent), never as HTML: user ids and model names come
// from clients.
'use strict';

(() => {
  const STORE = 'model-gateway-admin-key';
  const GROUP_LABEL = { model: 'model', provider: 'provider', key: 'key', user: 'user' };
  const METRIC_LABEL = { requests: 'Requests', errors: 'Errors', input_tokens: 'Input tokens', output_tokens: 'Output tokens', cost_usd: 'Cost (USD)' };
  // Bucket width for each range: 60 to 168 points a chart.
  const INTERVAL = { 3600000: '1m', 86400000: '15m', 604800000: '1h', 2592000000: '6h' };
  const UNIT = { m: 60000, h: 3600000 };
  const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#595959'];
  const MAX_SERIES = 8;

  const $ = (id) => document.getElementById(id);
  const nf = new Intl.NumberFormat();
  const charts = {};
  let loading = 0;

  class Refused extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // ---- the API ------------------------------------------------------------

  async function api(key, path, params) {
    const query = new URLSearchParams(params).toString();
    // Relative to the page: the gateway that served it, whatever its path prefix.
    const res = await fetch(`${path}?${query}`, { headers: { authorization: `Bearer ${key}`, accept: 'application/json' }, cache: 'no-store', credentials: 'omit' });
    let body;
    try {
      body = await res.json();
    } catch {
      body = undefined;
    }
    const message = body && body.error && typeof body.error.message === 'string' ? body.error.message : `HTTP ${res.status}`;
    if (res.status === 401 || res.status === 403) throw new Refused(res.status, message);
    if (!res.ok) throw new Error(message);
    return body.data;
  }

  async function fetchAll(key, view) {
    const range = { from: String(Math.floor(view.from / 1000)), to: String(Math.ceil(view.to / 1000)) };
    const over = { ...range, interval: view.interval };
    const grouped = { ...range, group_by: view.group };
    const [overall, series, groups, latency, latencyOverTime, latencyGroups, failures] = await Promise.all([
      api(key, 'admin/usage', range),
      api(key, 'admin/usage', { ...over, group_by: view.group }),
      api(key, 'admin/usage', grouped),
      api(key, 'admin/usage/latency', range),
      api(key, 'admin/usage/latency', over),
      api(key, 'admin/usage/latency', grouped),
      api(key, 'admin/usage/records', { ...range, errors: 'true', limit: '20' }),
    ]);
    return { overall: overall[0], series, groups, latency: latency[0], latencyOverTime, latencyGroups, failures };
  }

  // ---- formatting ---------------------------------------------------------

  const int = (n) => nf.format(n);
  const ms = (n) => (n === null || n === undefined ? '–' : `${nf.format(n)} ms`);
  function usd(n) {
    if (n === null || n === undefined) return '–';
    if (n === 0) return '$0';
    return n >= 1 ? `$${n.toFixed(2)}` : `$${Number(n.toPrecision(3))}`;
  }
  const groupName = (v) => (v === null || v === undefined ? '(none)' : String(v));
  const time = (iso) => new Date(iso).toLocaleString();

  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  }

  /** A table: a caption, a header row, then rows of cells (strings, or elements). */
  function fillTable(table, caption, head, rows) {
    table.replaceChildren(el('caption', caption));
    const thead = el('thead');
    const tr = el('tr');
    for (const h of head) tr.append(el('th', h, { scope: 'col' }));
    thead.append(tr);
    const tbody = el('tbody');
    for (const r of rows) {
      const row = el('tr');
      r.forEach((cell, i) => {
        const c = i === 0 ? el('th', null, { scope: 'row' }) : el('td');
        if (cell instanceof Node) c.append(cell);
        else c.textContent = cell;
        row.append(c);
      });
      tbody.append(row);
    }
    table.append(thead, tbody);
  }

  // ---- charts -------------------------------------------------------------

  /** Bucket starts (Unix ms) covering [from, to), aligned as the API aligns them. */
  function buckets(view) {
    const width = Number(view.interval.slice(0, -1)) * UNIT[view.interval.slice(-1)];
    const out = [];
    for (let t = Math.floor(view.from / width) * width; t < view.to; t += width) out.push(t);
    return out;
  }

  function chart(id, title, xs, series, format, points) {
    const box = $(id);
    if (charts[id]) charts[id].destroy();
    box.setAttribute('aria-label', `${title}: a line chart; its data is in the table below it.`);
    const opts = {
      width: Math.max(320, box.clientWidth),
      height: 260,
      series: [{ label: 'Time', value: (_u, v) => (v === null ? '–' : new Date(v * 1000).toLocaleString()) }, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false, points: { show: points }, value: (_u, v) => (v === null ? '–' : format(v)) }))],
      axes: [{}, { values: (_u, ticks) => ticks.map((v) => format(v)), size: 70 }],
      scales: { y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    charts[id] = new window.uPlot(opts, [xs.map((t) => t / 1000), ...series.map((s) => s.values)], box);
  }

  function drawUsage(view, data) {
    const xs = buckets(view);
    const index = new Map(xs.map((t, i) => [t, i]));
    const metric = view.metric;
    // The groups with the most of the metric get a line each; the rest share one.
    const totals = new Map();
    for (const g of data.groups) totals.set(groupName(g[view.group]), g[metric] || 0);
    const names = [...totals.keys()].sort((a, b) => totals.get(b) - totals.get(a) || a.localeCompare(b));
    const shown = names.slice(0, MAX_SERIES);
    const rest = names.length > MAX_SERIES ? `other ${names.length - MAX_SERIES} ${GROUP_LABEL[view.group]}s` : undefined;
    const lines = new Map([...shown, ...(rest ? [rest] : [])].map((n) => [n, xs.map(() => 0)]));
    for (const row of data.series) {
      const i = index.get(Date.parse(row.start));
      if (i === undefined) continue;
      const name = groupName(row[view.group]);
      const line = lines.get(shown.includes(name) ? name : rest);
      if (line) line[i] += row[metric] || 0;
    }
    const series = [...lines].map(([label, values]) => ({ label, values }));
    const format = metric === 'cost_usd' ? usd : int;
    const title = `${METRIC_LABEL[metric]} by ${GROUP_LABEL[view.group]}, per ${view.interval}`;
    $('usage-title').textContent = title;
    chart('chart-usage', title, xs, series, format, false);
    fillTable(
      $('table-usage'),
      title,
      ['Start', ...series.map((s) => s.label)],
      xs.map((t, i) => [new Date(t).toLocaleString(), ...series.map((s) => format(s.values[i]))]),
    );
  }

  function drawLatency(view, data) {
    const xs = buckets(view);
    const index = new Map(xs.map((t, i) => [t, i]));
    const picks = [
      ['latency_ms', 'p50', 'Latency p50'],
      ['latency_ms', 'p95', 'Latency p95'],
      ['latency_ms', 'p99', 'Latency p99'],
      ['ttfb_ms', 'p50', 'TTFB p50'],
      ['ttfb_ms', 'p95', 'TTFB p95'],
    ];
    const series = picks.map(([m, p, label]) => ({ label, values: xs.map(() => null), m, p }));
    for (const row of data.latencyOverTime) {
      const i = index.get(Date.parse(row.start));
      if (i === undefined || !row.requests) continue;
      for (const s of series) s.values[i] = row[s.m][s.p];
    }
    const title = `Latency and time to first byte percentiles, per ${view.interval}`;
    // Points: a bucket between two empty ones is a point, not a line.
    chart('chart-latency', title, xs, series, (v) => ms(Math.round(v)), true);
    const rows = [];
    xs.forEach((t, i) => {
      if (series.some((s) => s.values[i] !== null)) rows.push([new Date(t).toLocaleString(), ...series.map((s) => ms(s.values[i]))]);
    });
    fillTable($('table-latency'), `${title} (buckets with requests)`, ['Start', ...series.map((s) => `${s.label} (ms)`)], rows);
  }

  function drawTotals(data) {
    const o = data.overall;
    const l = data.latency;
    const tiles = [
      ['requests', 'Requests', int(o.requests)],
      ['errors', 'Errors', `${int(o.errors)}${o.requests ? ` (${((100 * o.errors) / o.requests).toFixed(1)}%)` : ''}`],
      ['input_tokens', 'Input tokens', int(o.input_tokens)],
      ['output_tokens', 'Output tokens', int(o.output_tokens)],
      ['cost_usd', 'Cost', usd(o.cost_usd)],
      ['latency', 'Latency p50 / p95', `${ms(l.latency_ms.p50)} / ${ms(l.latency_ms.p95)}`],
      ['ttfb', 'Time to first byte p50 / p95', `${ms(l.ttfb_ms.p50)} / ${ms(l.ttfb_ms.p95)}`],
    ];
    const dl = $('totals');
    dl.replaceChildren();
    for (const [name, label, value] of tiles) {
      const div = el('div', null, { class: 'tile' });
      div.append(el('dt', label), el('dd', value, { 'data-total': name }));
      dl.append(div);
    }
  }

  function drawGroups(view, data) {
    const label = GROUP_LABEL[view.group];
    $('groups-title').textContent = `By ${label}`;
    const lat = new Map(data.latencyGroups.map((r) => [groupName(r[view.group]), r]));
    const rows = [...data.groups]
      .sort((a, b) => b.requests - a.requests)
      .map((g) => {
        const name = groupName(g[view.group]);
        const l = lat.get(name);
        return [name, int(g.requests), int(g.errors), int(g.input_tokens), int(g.output_tokens), usd(g.cost_usd), ms(l?.latency_ms.p50), ms(l?.latency_ms.p95), ms(l?.ttfb_ms.p50), ms(l?.ttfb_ms.p95)];
      });
    const head = [label[0].toUpperCase() + label.slice(1), 'Requests', 'Errors', 'Input tokens', 'Output tokens', 'Cost', 'Latency p50', 'Latency p95', 'TTFB p50', 'TTFB p95'];
    fillTable($('table-groups'), `Usage by ${label}`, head, rows);
  }

  function drawFailures(data) {
    const rows = data.failures.map((r) => [
      el('code', r.request_id),
      time(r.time),
      String(r.status),
      r.error_type ?? '',
      r.endpoint,
      r.model ?? r.requested_model ?? '',
      r.provider ?? '',
      r.key_name ?? '',
      r.user_id ?? '',
    ]);
    $('no-errors').hidden = rows.length > 0;
    $('table-errors').hidden = rows.length === 0;
    fillTable($('table-errors'), 'The latest failed requests, newest first', ['Request id', 'Time', 'Status', 'Error', 'Endpoint', 'Model', 'Provider', 'Key', 'User'], rows);
  }

  // ---- the page -----------------------------------------------------------

  function view() {
    const span = Number($('range').value);
    const to = Date.now();
    return { from: to - span, to, interval: INTERVAL[span], group: $('group').value, metric: $('metric').value };
  }

  function showLogin(message) {
    $('board').hidden = true;
    $('forget').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = message || '';
    $('key').focus();
  }

  function refusal(err) {
    if (err.status === 403) return `The gateway refused this key (403): ${err.message}`;
    return `The gateway refused this admin key (401): ${err.message}`;
  }

  /** Load and draw everything with `key`; true when the key was accepted. */
  async function load(key) {
    const v = view();
    const mine = ++loading;
    $('status').textContent = 'Loading…';
    let data;
    try {
      data = await fetchAll(key, v);
    } catch (err) {
      if (mine !== loading) return true;
      $('status').textContent = '';
      if (err instanceof Refused) {
        sessionStorage.removeItem(STORE);
        showLogin(refusal(err));
        return false;
      }
      $('failure').textContent = `The usage API answered with an error: ${err.message}`;
      $('failure').hidden = false;
      $('board').hidden = false;
      $('login').hidden = true;
      $('forget').hidden = false;
      return true;
    }
    if (mine !== loading) return true;
    $('failure').hidden = true;
    $('login').hidden = true;
    $('board').hidden = false;
    $('forget').hidden = false;
    const empty = !data.overall || data.overall.requests === 0;
    $('empty').hidden = !empty;
    $('content').hidden = empty;
    if (empty) {
      $('empty-text').textContent =
        `The gateway recorded no request between ${new Date(v.from).toLocaleString()} and ${new Date(v.to).toLocaleString()}. ` +
        'Requests to the model endpoints appear here shortly after they finish; try a longer range, or Refresh.';
    } else {
      drawTotals(data);
      drawUsage(v, data);
      drawLatency(v, data);
      drawGroups(v, data);
      drawFailures(data);
    }
    $('status').textContent = `Updated ${new Date().toLocaleTimeString()}: ${empty ? 'no requests' : `${int(data.overall.requests)} requests`} in the range.`;
    return true;
  }

  function start() {
    $('login-form').addEventListener('submit', async (e) => {
      e.preventDefault();
      const input = $('key');
      const key = input.value.trim();
      input.value = '';
      if (!key) return showLogin('Type an admin key.');
      $('login-error').textContent = '';
      if (await load(key)) {
        sessionStorage.setItem(STORE, key);
        // The form is gone: keyboard and screen-reader users start at the top of the board.
        $('board-title').focus();
      }
    });
    $('controls').addEventListener('submit', (e) => {
      e.preventDefault();
      reload();
    });
    for (const id of ['range', 'group', 'metric']) $(id).addEventListener('change', reload);
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(STORE);
      showLogin('The admin key is forgotten in this tab.');
    });
    let resize;
    window.addEventListener('resize', () => {
      clearTimeout(resize);
      resize = setTimeout(() => {
        for (const [id, c] of Object.entries(charts)) c.setSize({ width: Math.max(320, $(id).clientWidth), height: 260 });
      }, 100);
    });
    const key = sessionStorage.getItem(STORE);
    if (key) void load(key);
    else showLogin();
  }

  function reload() {
    const key = sessionStorage.getItem(STORE);
    if (key) void load(key);
    else showLogin();
  }

  start();
})();
