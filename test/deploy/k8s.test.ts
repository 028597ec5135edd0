// The Kubernetes manifests in deploy/k8s/ (docs/deploy.md) agree with cfgu: every environment variable they set is
// one cfgu reads (or one the mounted .configu renders), the probes' paths are routes that answer 200 on a ready
// server, the ports line up (containerPort, the port cfgu resolves from that environment and .configu, the probes,
// the Service), the .configu lands at the path the image names and loads, the Secret and ConfigMap keys exist, the
// grace period leaves room for cfgu's own, and the command is a cfgu sub-command.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { buildServer, Lifecycle, settingsWith } from '../../src/server/index.js';
import { SETTINGS_ENV_VARS, resolveSettings } from '../../src/server/process/resolve-settings.js';
import { ENV_OPTIONS } from '../../src/expressions/index.js';
import { loadConfiguration } from '../../src/config/index.js';
import { commands } from '../../src/cli/main.js';
import { MemoryResolver, HostEvaluator } from '../helpers/engine.js';
import { ROOT } from '../server/helpers.js';

const dir = join(ROOT, 'deploy', 'k8s');
const read = (name: string) => YAML.parse(readFileSync(join(dir, name), 'utf8')) as Record<string, any>;
const deployment = read('deployment.yaml');
const service = read('service.yaml');
const configMap = read('configmap.yaml');
const secret = read('secret.yaml');
const pod = deployment.spec.template.spec;
const container = pod.containers[0];
const env = Object.fromEntries((container.env as Array<{ name: string; value?: string }>).map((e) => [e.name, e]));
const literal = Object.fromEntries(Object.entries(env).filter(([, e]) => e.value !== undefined).map(([k, e]) => [k, e.value as string]));
/** The container's environment as the kubelet builds it: literal values and the Secret's values. */
const podEnv: Record<string, string> = Object.fromEntries(
  (container.env as Array<Record<string, any>>).map((e) => [e.name, e.value ?? secret.stringData[e.valueFrom?.secretKeyRef?.key]]),
);
const temp = mkdtempSync(join(tmpdir(), 'cfgu-k8s-'));
after(() => rmSync(temp, { recursive: true, force: true }));

/** The image's ENV lines (Dockerfile), e.g. CONFIGU_CONFIGURATION. */
const imageEnv = Object.fromEntries(
  [...readFileSync(join(ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ').matchAll(/^ENV (.+)$/gm)].flatMap((m) =>
    m[1]!.trim().split(/\s+/).map((kv) => kv.split('=') as [string, string]),
  ),
);

test('every variable the Deployment sets is read by cfgu or rendered into the mounted .configu', () => {
  const known = new Set([...SETTINGS_ENV_VARS, ...ENV_OPTIONS.map((o) => o[1]), 'CONFIGU_CONFIGURATION', 'CONFIGU_CONFIG']);
  const rendered = new Set([...String(configMap.data['.configu']).matchAll(/\{\{\s*([A-Z_][A-Z0-9_]*)\s*\}\}/g)].map((m) => m[1]!));
  for (const name of Object.keys(env)) assert.ok(known.has(name) || rendered.has(name), `${name} is neither a cfgu variable nor used by the .configu`);
  for (const name of rendered) assert.ok(env[name], `the .configu needs ${name}, which the Deployment does not set`);
});

test('Secret and ConfigMap references point at keys that exist', () => {
  for (const e of Object.values(env) as Array<Record<string, any>>) {
    const ref = e.valueFrom?.secretKeyRef;
    if (!ref) continue;
    assert.equal(ref.name, secret.metadata.name);
    assert.ok(ref.key in secret.stringData, `secret key ${ref.key}`);
  }
  const volume = pod.volumes.find((v: any) => v.configMap);
  assert.equal(volume.configMap.name, configMap.metadata.name);
  for (const item of volume.configMap.items) assert.ok(item.key in configMap.data, `configmap key ${item.key}`);
});

test('the .configu is mounted where the image looks for it, and loads with the Deployment environment', async () => {
  const volume = pod.volumes.find((v: any) => v.configMap);
  const mount = container.volumeMounts.find((m: any) => m.name === volume.name);
  const path = `${mount.mountPath}/${volume.configMap.items[0].path}`;
  assert.equal(path, imageEnv.CONFIGU_CONFIGURATION);
  assert.equal(literal.CONFIGU_CONFIGURATION ?? imageEnv.CONFIGU_CONFIGURATION, path);
  const file = join(temp, '.configu');
  writeFileSync(file, configMap.data['.configu']);
  const loaded = await loadConfiguration({ file, env: podEnv, cwd: temp });
  assert.deepEqual(
    loaded.stores.map((s) => [s.name, s.type]),
    [['main', 'postgresql']],
  );
  assert.equal(loaded.defaultStore, 'main');
});

test('ports: container, cfgu settings from that environment and file, probes and Service agree', async () => {
  const file = join(temp, '.configu');
  writeFileSync(file, configMap.data['.configu']);
  const loaded = await loadConfiguration({ file, env: podEnv, cwd: temp });
  const settings = resolveSettings({ env: podEnv, fileSettings: (loaded.interface as any)?.proxy, file, cwd: temp });
  const port = container.ports.find((p: any) => p.name === 'http');
  assert.equal(port.containerPort, settings.http.port);
  assert.equal(String(settings.http.port), imageEnv.CONFIGU_HTTP_PORT);
  assert.equal(container.readinessProbe.httpGet.port, 'http');
  assert.equal(container.livenessProbe.httpGet.port, 'http');
  assert.equal(service.spec.ports[0].targetPort, 'http');
  assert.deepEqual(service.spec.selector, deployment.spec.selector.matchLabels);
  assert.equal(settings.workers, 1);
  assert.equal(settings.auth.enabled, true);
  assert.deepEqual(settings.auth.presharedKeys, [secret.stringData.presharedKeys]);
});

test('the probe paths answer 200 on a ready cfgu server', async () => {
  const app = await buildServer({
    registry: new MemoryResolver([]),
    evaluator: new HostEvaluator(),
    settings: settingsWith({}),
    logger: false,
    lifecycle: new Lifecycle(),
    ready: true,
  });
  try {
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      const r = await app.inject({ method: 'GET', url: probe.httpGet.path });
      assert.equal(r.statusCode, 200, `${probe.httpGet.path}: ${r.body}`);
    }
  } finally {
    await app.close();
  }
});

test('termination grace leaves room for cfgu\'s drain and grace (no preStop needed); the command is a cfgu sub-command', () => {
  assert.equal(container.lifecycle, undefined, 'cfgu drains by itself after SIGTERM: no preStop pause');
  const drain = Number(literal.CONFIGU_SHUTDOWN_DRAIN_SECONDS);
  const grace = Number(literal.CONFIGU_SHUTDOWN_GRACE_SECONDS);
  assert.ok(drain >= 5, 'the drain covers the endpoint removal');
  assert.ok(pod.terminationGracePeriodSeconds > drain + grace, `${pod.terminationGracePeriodSeconds} > ${drain} + ${grace}`);
  assert.ok(container.args[0] in commands, container.args[0]);
  assert.equal(pod.securityContext.runAsUser, 65532);
});
