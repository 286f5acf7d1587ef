// The deployment files (docs/deployment.md) checked without a Docker engine or
// a helm binary: the compose file's services, images, environment and
// healthchecks; the Helm chart rendered by test/helpers/helm-render (Go's
// text/template, the engine Helm uses) into Kubernetes objects whose
// gateway.yaml passes `model-gateway check`. The image's build steps run in
// test/deploy-image.test.ts.
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cli = path.join(repo, 'dist/src/cli.js');
const read = (f: string) => fs.readFileSync(path.join(repo, f), 'utf8');

/** `model-gateway check` on a config text, with the environment a pod would have. */
function check(yaml: string, env: Record<string, string> = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-check-'));
  try {
    const file = path.join(dir, 'gateway.yaml');
    fs.writeFileSync(file, yaml);
    return spawnSync(process.execPath, [cli, 'check', file], { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

t.test('docker-compose.yaml: two gateways, Redis, PostgreSQL and a load balancer', async (t) => {
  const compose = YAML.parse(read('docker-compose.yaml'), { merge: true });
  const services = compose.services as Record<string, any>;
  t.same(Object.keys(services).sort(), ['gateway-1', 'gateway-2', 'lb', 'postgres', 'redis']);
  t.match(services.redis.image, /^redis:\d/);
  t.match(services.postgres.image, /^postgres:\d/);
  t.match(services.lb.image, /^haproxy:\d/);
  for (const name of ['gateway-1', 'gateway-2']) {
    const g = services[name];
    t.match(g.image, /^model-gateway:/, `${name} runs the gateway image`);
    t.equal(g.build, '.', `${name} builds it from the Dockerfile`);
    t.match(g.environment.REDIS_URL, /^redis:\/\/redis:6379/, `${name}: REDIS_URL names the redis service`);
    t.match(g.environment.DATABASE_URL, /^postgres:\/\/gateway:.*@postgres:5432\/gateway$/, `${name}: DATABASE_URL names the postgres service`);
    t.equal(g.environment.DATABASE_URL.includes(services.postgres.environment.POSTGRES_PASSWORD), true, 'the same password as the database');
    for (const v of ['GATEWAY_API_KEYS', 'GATEWAY_ADMIN_KEY', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GEMINI_API_KEY']) {
      t.match(g.environment[v], new RegExp(`^\\$\\{${v}[:}]`), `${name}: ${v} comes from the environment`);
    }
    t.same(g.depends_on, { redis: { condition: 'service_healthy' }, postgres: { condition: 'service_healthy' } });
    t.match(g.healthcheck.test.join(' '), /\/healthz/);
    t.equal(g.volumes[0], 'gateway-data:/var/lib/model-gateway', `${name}: the data volume`);
  }
  t.ok('gateway-data' in compose.volumes, 'one volume both replicas share: the SQLite files of a config without DATABASE_URL (WAL, one host)');
  t.same(services.lb.depends_on, { 'gateway-1': { condition: 'service_healthy' }, 'gateway-2': { condition: 'service_healthy' } });
  for (const s of ['redis', 'postgres', 'lb']) t.ok(services[s].healthcheck?.test, `${s} has a healthcheck`);
  // The config the lb mounts exists and sends to both replicas, checking /healthz.
  const mount = (services.lb.volumes[0] as string).split(':')[0]!;
  const haproxy = read(mount);
  t.match(haproxy, /server gateway-1 gateway-1:8080/);
  t.match(haproxy, /server gateway-2 gateway-2:8080/);
  t.match(haproxy, /option httpchk GET \/healthz/);
  t.match(haproxy, /bind :8080/);
  t.equal(services.lb.ports[0].endsWith(':8080'), true);
  // Stream timeouts cover the gateway's silent-stream limit (providers[].stream_idle_timeout_ms, 300 s).
  t.ok(Number(/timeout server (\d+)s/.exec(haproxy)![1]) > 300);
  // The gateways' stop grace covers the drain (server.shutdown_timeout_ms of the image's config + 1 s + the primary's 5 s).
  const shipped = YAML.parse(read('gateway.yaml'));
  t.ok(parseInt(services['gateway-1'].stop_grace_period) >= shipped.server.shutdown_timeout_ms / 1000 + 6);
  // The image's config takes what compose sets.
  const res = check(read('gateway.yaml'), { REDIS_URL: 'redis://redis:6379/0', DATABASE_URL: 'postgres://gateway:x@postgres:5432/gateway' });
  t.equal(res.status, 0, res.stdout + res.stderr);
});

const haproxy = spawnSync('haproxy', ['-v'], { encoding: 'utf8' }).status === 0;
t.test('HAProxy accepts the load balancer config', { skip: haproxy ? false : 'no haproxy binary (apt-get install haproxy) to check deploy/compose/haproxy.cfg with' }, async (t) => {
  // -c checks the whole file; the servers' names resolve only inside Compose's network (init-addr none starts without them).
  const res = spawnSync('haproxy', ['-c', '-f', path.join(repo, 'deploy/compose/haproxy.cfg')], { encoding: 'utf8' });
  t.equal(res.status, 0, res.stdout + res.stderr);
  t.match(res.stdout + res.stderr, /Configuration file is valid/);
});

const chartDir = path.join(repo, 'deploy/helm/model-gateway');
const goSrc = path.join(repo, 'test/helpers/helm-render');
const go = spawnSync('go', ['version'], { encoding: 'utf8' });
const haveGo = go.status === 0;

function render(values: Record<string, unknown> = {}): Record<string, any>[] {
  const chart = YAML.parse(fs.readFileSync(path.join(chartDir, 'Chart.yaml'), 'utf8'));
  const base = YAML.parse(fs.readFileSync(path.join(chartDir, 'values.yaml'), 'utf8'));
  const input = {
    chartDir,
    values: { ...base, ...values },
    chart: { Name: chart.name, Version: chart.version, AppVersion: chart.appVersion },
    release: { Name: 'gw', Namespace: 'llm' },
  };
  const out = execFileSync('go', ['run', '.'], { cwd: goSrc, input: JSON.stringify(input), encoding: 'utf8', env: { ...process.env, ...(process.env.HOME || process.env.GOCACHE ? {} : { GOCACHE: path.join(os.tmpdir(), 'mg-go-cache') }) } });
  const files = JSON.parse(out) as Record<string, string>;
  const docs: Record<string, any>[] = [];
  for (const [name, text] of Object.entries(files)) {
    if (name.endsWith('.txt')) continue;
    for (const doc of YAML.parseAllDocuments(text)) {
      if (doc.errors.length) throw new Error(`${name}: ${doc.errors[0]!.message}`);
      const obj = doc.toJS();
      if (obj) docs.push(obj);
    }
  }
  return docs;
}

t.test('the Helm chart renders into the objects a deployment needs', { skip: haveGo ? false : 'no Go toolchain (apt-get install golang-go) to render the chart with text/template' }, async (t) => {
  const docs = render({ secret: { existingSecret: '', env: { GATEWAY_API_KEYS: 'k1,k2', REDIS_URL: 'redis://redis:6379/0' } } });
  const byKind = Object.fromEntries(docs.map((d) => [d.kind, d]));
  t.same(docs.map((d) => d.kind).sort(), ['ConfigMap', 'Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Secret', 'Service']);
  for (const d of docs) t.equal(d.metadata.name, 'gw-model-gateway', `${d.kind} is named after the release`);

  const dep = byKind.Deployment;
  t.equal(dep.apiVersion, 'apps/v1');
  t.equal(dep.spec.replicas, undefined, 'the HPA sets the replicas');
  const pod = dep.spec.template.spec;
  const c = pod.containers[0];
  t.same(dep.spec.selector.matchLabels, { 'app.kubernetes.io/name': 'model-gateway', 'app.kubernetes.io/instance': 'gw' });
  t.match(dep.spec.template.metadata.labels, dep.spec.selector.matchLabels);
  t.same(c.ports, [{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
  t.same(c.readinessProbe.httpGet, { path: '/healthz', port: 'http' });
  t.same(c.livenessProbe.httpGet, { path: '/healthz', port: 'http' });
  t.equal(c.readinessProbe.failureThreshold, 1, 'a draining pod leaves the endpoints at the first 503');
  t.equal(pod.securityContext.runAsNonRoot, true);
  t.equal(pod.securityContext.runAsUser, 1000);
  t.equal(c.securityContext.allowPrivilegeEscalation, false);
  t.equal(c.securityContext.readOnlyRootFilesystem, true);
  t.same(c.securityContext.capabilities.drop, ['ALL']);
  t.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
  t.same(c.envFrom, [{ secretRef: { name: 'gw-model-gateway' } }]);
  const env = Object.fromEntries(c.env.map((e: any) => [e.name, e.value]));
  t.equal(env.GATEWAY_CONFIG, '/etc/model-gateway/gateway.yaml');
  t.equal(env.PORT, '8080');
  t.same(c.volumeMounts.find((m: any) => m.name === 'config'), { name: 'config', mountPath: '/etc/model-gateway', readOnly: true }, 'a directory mount (not subPath): ConfigMap updates reach the file');
  t.same(pod.volumes.find((v: any) => v.name === 'config').configMap.name, byKind.ConfigMap.metadata.name);
  // A read-only root: the image's compile cache (NODE_COMPILE_CACHE in the Dockerfile) is a volume of its own,
  // which outlives a container's restart in the pod.
  const cacheDir = /NODE_COMPILE_CACHE=(\S+)/.exec(fs.readFileSync(path.join(repo, 'Dockerfile'), 'utf8'))?.[1];
  t.ok(cacheDir, 'the image names its compile cache');
  const cacheMount = c.volumeMounts.find((m: any) => m.mountPath === cacheDir);
  t.ok(cacheMount && !cacheMount.readOnly, `${cacheDir} is mounted writable`);
  t.same(pod.volumes.find((v: any) => v.name === cacheMount?.name)?.emptyDir, {}, 'on an emptyDir');
  t.same(c.lifecycle.preStop.exec.command, ['sleep', '5']);

  // Drain: the grace period covers preStop + the config's shutdown deadline + the exit.
  const config = byKind.ConfigMap.data['gateway.yaml'] as string;
  const parsed = YAML.parse(config);
  t.ok(pod.terminationGracePeriodSeconds >= 5 + parsed.server.shutdown_timeout_ms / 1000 + 1);
  // Liveness never restarts a pod that is draining (its /healthz answers 503 then).
  t.ok(c.livenessProbe.periodSeconds * c.livenessProbe.failureThreshold > parsed.server.shutdown_timeout_ms / 1000);

  // The config map's file is a valid gateway.yaml, with the pod's environment.
  const res = check(config, { ...env, GATEWAY_API_KEYS: 'k1,k2', REDIS_URL: 'redis://redis:6379/0' });
  t.equal(res.status, 0, res.stdout + res.stderr);
  t.equal(parsed.server.workers, 1, 'one process per pod');
  t.match(config, /redis_url: \$\{REDIS_URL:-\}/);
  t.match(config, /url: \$\{DATABASE_URL:-\}/);
  t.equal(dep.spec.template.metadata.annotations['checksum/config'], (await import('node:crypto')).createHash('sha256').update(YAML.parse(fs.readFileSync(path.join(chartDir, 'values.yaml'), 'utf8')).config).digest('hex'));

  t.same(byKind.Secret.stringData, { GATEWAY_API_KEYS: 'k1,k2', REDIS_URL: 'redis://redis:6379/0' });
  t.same(byKind.Service.spec.ports, [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }]);
  t.same(byKind.Service.spec.selector, dep.spec.selector.matchLabels);
  t.same(byKind.HorizontalPodAutoscaler.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'gw-model-gateway' });
  t.equal(byKind.HorizontalPodAutoscaler.spec.minReplicas, 2);
  t.same(byKind.PodDisruptionBudget.spec.selector.matchLabels, dep.spec.selector.matchLabels);
});

t.test('the chart with its options: existing secret, no HPA, watch reloads, the shipped catalog', { skip: haveGo ? false : 'no Go toolchain (apt-get install golang-go) to render the chart with text/template' }, async (t) => {
  const shipped = read('gateway.yaml');
  const docs = render({
    secret: { existingSecret: 'my-keys', env: {} },
    autoscaling: { enabled: false },
    podDisruptionBudget: { enabled: false },
    replicaCount: 3,
    configReload: 'watch',
    config: shipped,
    extraEnv: [{ name: 'LOG_LEVEL', value: 'debug' }],
    dataVolume: { persistentVolumeClaim: { claimName: 'gw-data' } },
  });
  t.same(docs.map((d) => d.kind).sort(), ['ConfigMap', 'Deployment', 'Service']);
  const dep = docs.find((d) => d.kind === 'Deployment')!;
  const c = dep.spec.template.spec.containers[0];
  t.equal(dep.spec.replicas, 3);
  t.same(c.envFrom, [{ secretRef: { name: 'my-keys' } }]);
  t.same(c.env.at(-1), { name: 'LOG_LEVEL', value: 'debug' });
  t.equal(dep.spec.template.metadata.annotations?.['checksum/config'], undefined, 'watch: a config change does not roll the pods');
  t.same(dep.spec.template.spec.volumes.find((v: any) => v.name === 'data'), { name: 'data', persistentVolumeClaim: { claimName: 'gw-data' } });
  const config = docs.find((d) => d.kind === 'ConfigMap')!.data['gateway.yaml'];
  t.equal(config.trimEnd(), shipped.trimEnd(), '--set-file config=gateway.yaml carries the file as it is');
  const res = check(config, { GATEWAY_RESPONSES_DB: '/var/lib/model-gateway/responses.sqlite' });
  t.equal(res.status, 0, res.stdout + res.stderr);
});
