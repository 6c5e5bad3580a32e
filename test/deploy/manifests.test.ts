// deploy/ held to Kubernetes and to the gateway, offline: every overlay renders with `kubectl
// kustomize`; every rendered object validates against Kubernetes' schemas (kubernetes-validate,
// strict) or the vendored CRD schemas (deploy/schemas/); and the manifests agree with the gateway
// they run: the ConfigMap's file loads through the real config loader, ports and probe paths are the
// gateway's, files the config names are mounted, the pod runs as the image's non-root UID, images
// are pinned, resources set, and the grace period outlasts the drain; every object is in its
// overlay's namespace and every reference between objects resolves there (references.ts), or to an
// object README "Before you apply" says to make first. Rendered by `kubectl kustomize`,
// else by the `kustomize` that .ci/run builds where kubectl is missing; skipped, saying so, only
// where neither is installed.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { loadConfig } from '../../gateway/config/load';
import type { Config } from '../../gateway/config/schema';
import { probeRoutes } from '../../gateway/routes/health';
import type { ControlPlane } from '../../gateway/upstream/control/control-plane';
import { METRICS, prometheusName } from '../../gateway/telemetry/metrics';
import { makePki, type Pki } from '../support/certs';
import { KUBECTL, KUSTOMIZE, needs, OPENSSL, PYTHON } from '../support/tools';
import { checkReferences, type Outside } from './references';

const ROOT = path.join(__dirname, '..', '..');
const ROLES = ['sidecar', 'ingress', 'shim'] as const;
type Role = (typeof ROLES)[number];
/** Native sidecars (initContainers with restartPolicy: Always) are stable from 1.33. */
const KUBERNETES = '1.33.0';
/** The Dockerfile's USER. */
const IMAGE_UID = 10001;
const VERSION = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** `kubectl kustomize DIR`, or kustomize's own CLI's `kustomize build DIR` (test/support/tools.ts KUSTOMIZE). */
const RENDERER = ((t) => ({ cmd: t.path!, render: t.name === 'kubectl' ? ['kustomize'] : ['build'] }))(KUSTOMIZE());

/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-call --
   rendered objects are read field by field; validate.py has checked their shape */
type K8s = any;

function render(role: Role, deploy = path.join(ROOT, 'deploy')): K8s[] {
  const r = spawnSync(RENDERER.cmd, [...RENDERER.render, path.join(deploy, 'overlays', role)], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${RENDERER.cmd} ${RENDERER.render.join(' ')} deploy/overlays/${role}: ${r.error?.message ?? r.stderr}`);
  return parseAllDocuments(r.stdout).map((d): K8s => d.toJS());
}

/** The overlay's `namespace:` (kustomization.yaml). */
const namespaceOf = (role: Role): string => (parse(readFileSync(path.join(ROOT, 'deploy', 'overlays', role, 'kustomization.yaml'), 'utf8')) as { namespace: string }).namespace;

/**
 * What each overlay needs and does not make, each with the line of README "Before you apply" that
 * says how to make it (a command where one command does it). The reference check below fails on
 * an entry no object needs, and on a needed object missing here.
 */
const OUTSIDE: Record<Role, readonly (Outside & { readonly readme: string })[]> = {
  sidecar: [],
  ingress: [
    { kind: 'Secret', name: 'tensorgate-tls', readme: 'kubectl -n inference create secret tls tensorgate-tls --cert=tls.crt --key=tls.key' },
    { kind: 'Secret', name: 'tensorgate-auth', readme: 'kubectl -n inference create secret generic tensorgate-auth --from-file=keys.yaml' },
    { kind: 'ConfigMap', name: 'tensorgate-ca', readme: 'kubectl -n inference create configmap tensorgate-ca --from-file=ca.crt' },
    { kind: 'Gateway', name: 'inference-gateway', readme: 'Gateway `inference-gateway`' },
    { kind: 'Pod', labels: { 'app.kubernetes.io/name': 'triton' }, readme: 'pods labelled `app.kubernetes.io/name: triton`' },
    { kind: 'Pod', labels: { 'app.kubernetes.io/name': 'triton-canary' }, readme: 'pods labelled `app.kubernetes.io/name: triton-canary`' },
  ],
  shim: [
    { kind: 'Service', name: 'triton', ports: [8001], readme: 'kubectl -n inference expose deployment triton --port=8001' },
    { kind: 'Service', name: 'legacy-api', ports: [8080], readme: 'Service `legacy-api`' },
  ],
};

interface Validation {
  readonly validated: number;
  readonly kinds: Record<string, number>;
  readonly errors: string[];
}

/** test/deploy/validate.py in its venv (test/triton/venv.sh builds and caches it). */
function validate(objects: Record<string, K8s[]>): Record<string, Validation> {
  const venv = spawnSync('bash', [path.join(ROOT, 'test/triton/venv.sh'), path.join(__dirname, 'requirements.txt')], { encoding: 'utf8', timeout: 300_000 });
  if (venv.status !== 0) throw new Error(`venv.sh: ${venv.stderr}`);
  const python = path.join(venv.stdout.trim(), 'bin', 'python');
  const r = spawnSync(python, [path.join(__dirname, 'validate.py'), '--schemas', path.join(ROOT, 'deploy/schemas'), '--kubernetes', KUBERNETES], {
    input: JSON.stringify(objects), encoding: 'utf8', timeout: 60_000,
  });
  if (r.status !== 0) throw new Error(`validate.py: ${r.error?.message ?? r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, Validation>;
}

interface Pod {
  readonly owner: K8s;
  readonly spec: K8s;
  readonly labels: Record<string, string>;
}

const pods = (objects: K8s[]): Pod[] => objects.filter((o) => o.kind === 'Deployment')
  .map((d) => ({ owner: d, spec: d.spec.template.spec, labels: d.spec.template.metadata.labels }));
const containersOf = (spec: K8s): K8s[] => [...(spec.initContainers ?? []), ...spec.containers];
const matches = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

/** The pod running the gateway and its container (the one whose image is tensorgate's). */
function gatewayOf(objects: K8s[]): { pod: Pod; container: K8s } {
  const found = pods(objects).flatMap((pod) => containersOf(pod.spec).filter((c) => /(^|\/)tensorgate[:@]/.test(c.image)).map((container) => ({ pod, container })));
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** The volume behind the mount whose path is `dir`, or undefined. */
function volumeAt(pod: Pod, container: K8s, dir: string): K8s {
  const mount = (container.volumeMounts ?? []).find((m: K8s) => m.mountPath === dir);
  return mount === undefined ? undefined : pod.spec.volumes.find((v: K8s) => v.name === mount.name);
}

/** Config keys that name files the gateway reads. */
const FILE_KEYS = ['server.tls.cert', 'server.tls.key', 'server.tls.clientCa', 'auth.keysFile', 'auth.jwt.jwksFile', 'upstream.tls.ca', 'upstream.tls.cert', 'upstream.tls.key'];

function getKey(doc: K8s, key: string): unknown {
  return key.split('.').reduce((node, k) => (node === undefined || node === null ? undefined : node[k]), doc);
}

function setKey(doc: K8s, key: string, value: unknown): void {
  const parts = key.split('.');
  const last = parts.pop()!;
  parts.reduce((node, k) => node[k], doc)[last] = value;
}

interface Loaded {
  readonly text: string;
  readonly config: Config;
  /** The config's file keys with the paths the manifests give. */
  readonly files: Map<string, string>;
}

let pki: Pki;
let scratch: string;

/**
 * The gateway's config file as the pod sees it (TENSORGATE_CONFIG → a mounted ConfigMap key),
 * loaded through the real loader. File paths in it (certificates, keys files) are checked to lie
 * in a mounted Secret or ConfigMap, then pointed at test files so the loader can read them.
 */
function loadGatewayConfig(objects: K8s[], role: Role): Loaded {
  const { pod, container } = gatewayOf(objects);
  const configPath = container.env.find((e: K8s) => e.name === 'TENSORGATE_CONFIG')?.value as string;
  expect(configPath).toMatch(/^\//);
  const volume = volumeAt(pod, container, path.dirname(configPath));
  expect(volume?.configMap?.name).toBeDefined();
  const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume.configMap.name);
  const text = configMap?.data?.[path.basename(configPath)] as string;
  expect(typeof text).toBe('string');

  const doc: K8s = parse(text);
  const files = new Map<string, string>();
  const testFiles: Record<string, string> = { 'server.tls.cert': pki.server.cert, 'server.tls.key': pki.server.key, 'server.tls.clientCa': pki.ca.cert, 'upstream.tls.ca': pki.ca.cert };
  for (const key of FILE_KEYS) {
    const file = getKey(doc, key);
    if (typeof file !== 'string' || file === '') continue;
    files.set(key, file);
    const source = volumeAt(pod, container, path.dirname(file));
    expect({ key, file, mounted: source?.secret !== undefined || source?.configMap !== undefined }).toEqual({ key, file, mounted: true });
    setKey(doc, key, testFiles[key] ?? file);
  }
  const local = path.join(scratch, `${role}.yaml`);
  writeFileSync(local, stringify(doc));
  const r = loadConfig({ argv: ['--config', local], env: {} });
  if (r.help) throw new Error('unexpected --help');
  return { text, config: r.config, files };
}

const rendered = new Map<Role, K8s[]>();
let validation: Record<string, Validation>;

needs(KUSTOMIZE(), PYTHON(), OPENSSL()).describe('deploy/ manifests', () => {
  beforeAll(() => {
    const t0 = performance.now();
    pki = makePki();
    scratch = mkdtempSync(path.join(tmpdir(), 'tensorgate-deploy-'));
    for (const role of ROLES) rendered.set(role, render(role));
    validation = validate(Object.fromEntries(rendered));
    const counts = ROLES.map((r) => `${r} ${validation[r]!.validated}/${rendered.get(r)!.length}`).join(', ');
    const by = `${path.basename(RENDERER.cmd)} ${RENDERER.render[0]}`;
    process.stderr.write(`[deploy] rendered by ${by}; objects validated against Kubernetes ${KUBERNETES} and the vendored CRD schemas: ${counts} (${Math.round(performance.now() - t0)} ms)\n`);
  }, 360_000);

  afterAll(() => {
    pki?.remove();
    if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
  });

  test.each(ROLES)('%s: every rendered object validates', (role) => {
    const v = validation[role]!;
    expect(v.errors).toEqual([]);
    expect(v.validated).toBe(rendered.get(role)!.length);
  });

  test('the validator refuses what the API server would', () => {
    const d = structuredClone(rendered.get('ingress')!.find((o) => o.kind === 'Deployment'));
    d.spec.template.spec.containers[0].imagePullPolicyy = 'Always';
    const route = structuredClone(rendered.get('ingress')!.find((o) => o.kind === 'HTTPRoute'));
    route.spec.rules[0].backendRefs[0].portt = 8000;
    const unknown = { apiVersion: 'example.com/v1', kind: 'Thing', metadata: { name: 'x' } };
    const v = validate({ bad: [d, route, unknown] }).bad!;
    expect(v.validated).toBe(0);
    expect(v.errors).toEqual([
      expect.stringContaining("'imagePullPolicyy' was unexpected"),
      expect.stringContaining("'portt' was unexpected"),
      expect.stringContaining("Couldn't find schema for kind Thing"),
    ]);
  }, 60_000);

  test.each(ROLES)('%s: the ConfigMap\'s file loads through the gateway\'s config loader; its ports are the container\'s', (role) => {
    const objects = rendered.get(role)!;
    const { config } = loadGatewayConfig(objects, role);
    const { container } = gatewayOf(objects);
    const port = (name: string): number => container.ports.find((p: K8s) => p.name === name)?.containerPort;
    expect({ http: port('http'), metrics: port('metrics') }).toEqual({ http: config.server.port, metrics: config.server.metricsPort });
    // Services reach the gateway by those port names, on pods they select.
    for (const svc of objects.filter((o) => o.kind === 'Service' && o.metadata.name === 'tensorgate')) {
      expect(pods(objects).some((p) => matches(svc.spec.selector, p.labels) && p.spec === gatewayOf(objects).pod.spec)).toBe(true);
      for (const p of svc.spec.ports) expect([p.targetPort, port(p.targetPort)]).toEqual([p.targetPort, expect.any(Number)]);
    }
  });

  test.each(ROLES)('%s: probes are the gateway\'s own routes, on its port, HTTPS exactly when server.tls is on', (role) => {
    const objects = rendered.get(role)!;
    const { config } = loadGatewayConfig(objects, role);
    const { container } = gatewayOf(objects);
    const routes = probeRoutes({} as ControlPlane, { draining: false });
    const routeOf = (probe: K8s): string | undefined => routes.find((r) => r.pattern.test(probe.httpGet.path) && r.methods.GET !== undefined)?.name;
    expect({
      startup: routeOf(container.startupProbe),
      liveness: routeOf(container.livenessProbe),
      readiness: routeOf(container.readinessProbe),
    }).toEqual({ startup: 'gateway_healthz', liveness: 'gateway_healthz', readiness: 'gateway_readyz' });
    const scheme = config.server.tls.cert === '' ? 'HTTP' : 'HTTPS';
    for (const probe of [container.startupProbe, container.livenessProbe, container.readinessProbe]) {
      expect({ port: probe.httpGet.port, scheme: probe.httpGet.scheme ?? 'HTTP' }).toEqual({ port: 'http', scheme });
    }
  });

  test.each(ROLES)('%s: every container runs as a numeric non-root user, unprivileged; the gateway as the image\'s UID on a read-only root', (role) => {
    const objects = rendered.get(role)!;
    for (const pod of pods(objects)) {
      const podSc = pod.spec.securityContext ?? {};
      for (const c of containersOf(pod.spec)) {
        const sc = c.securityContext ?? {};
        expect({
          container: c.name,
          runAsNonRoot: sc.runAsNonRoot ?? podSc.runAsNonRoot,
          numericUser: Number.isInteger(sc.runAsUser ?? podSc.runAsUser) && (sc.runAsUser ?? podSc.runAsUser) > 0,
          allowPrivilegeEscalation: sc.allowPrivilegeEscalation,
          drop: sc.capabilities?.drop,
          seccomp: (sc.seccompProfile ?? podSc.seccompProfile)?.type,
        }).toEqual({ container: c.name, runAsNonRoot: true, numericUser: true, allowPrivilegeEscalation: false, drop: ['ALL'], seccomp: 'RuntimeDefault' });
      }
    }
    const { container } = gatewayOf(objects);
    expect([container.securityContext.runAsUser, container.securityContext.readOnlyRootFilesystem]).toEqual([IMAGE_UID, true]);
  });

  test('the image UID is the Dockerfile\'s USER (when the Dockerfile is in the tree)', () => {
    const dockerfile = path.join(ROOT, 'Dockerfile');
    if (!existsSync(dockerfile)) return;
    expect(/^USER (\d+)/m.exec(readFileSync(dockerfile, 'utf8'))?.[1]).toBe(String(IMAGE_UID));
  });

  test.each(ROLES)('%s: images are pinned (never latest), the gateway\'s at package.json\'s version; resources are set', (role) => {
    for (const pod of pods(rendered.get(role)!)) {
      for (const c of containersOf(pod.spec)) {
        const tag = /^[^@]+:([^:/@]+)$/.exec(c.image)?.[1];
        expect({ image: c.image, pinned: /@sha256:/.test(c.image) || (tag !== undefined && tag !== 'latest') }).toEqual({ image: c.image, pinned: true });
        const { requests, limits } = c.resources ?? {};
        expect({ container: c.name, cpu: requests?.cpu !== undefined, memory: requests?.memory !== undefined, memoryLimit: limits?.memory !== undefined })
          .toEqual({ container: c.name, cpu: true, memory: true, memoryLimit: true });
      }
    }
    expect(gatewayOf(rendered.get(role)!).container.image).toBe(`tensorgate:${VERSION}`);
  });

  test.each(ROLES)('%s: limits.maxInFlightBodyBytes is at most a third of the memory limit (docs/production.md)', (role) => {
    const objects = rendered.get(role)!;
    const { config } = loadGatewayConfig(objects, role);
    const limit = gatewayOf(objects).container.resources.limits.memory as string;
    const units: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };
    const m = /^(\d+)(Ki|Mi|Gi)$/.exec(limit);
    expect(m).not.toBeNull();
    expect(config.limits.maxInFlightBodyBytes * config.workers).toBeLessThanOrEqual(Number(m![1]) * units[m![2]!]! / 3);
  });

  test.each(ROLES)('%s: terminationGracePeriodSeconds outlasts preStop sleeps, Triton\'s exit timeout and the gateway\'s grace and drain, + 5 s', (role) => {
    const objects = rendered.get(role)!;
    const { config } = loadGatewayConfig(objects, role);
    const { pod } = gatewayOf(objects);
    const containers = containersOf(pod.spec);
    const preStopMs = containers.reduce((s, c) => s + (c.lifecycle?.preStop?.sleep?.seconds ?? 0) * 1000, 0);
    const tritonExitMs = containers.flatMap((c) => c.args ?? []).map((a: string) => /^--exit-timeout-secs=(\d+)$/.exec(a)?.[1])
      .filter((s): s is string => s !== undefined).reduce((s, n) => s + Number(n) * 1000, 0);
    const needMs = preStopMs + tritonExitMs + config.server.drainGraceMs + config.server.drainTimeoutMs + 5000;
    expect(pod.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(needMs);
  });

  // Selectors finding pods (in the same namespace): the reference check below.
  test.each(ROLES)('%s: container ports are unique in each pod', (role) => {
    for (const pod of pods(rendered.get(role)!)) {
      const ports = containersOf(pod.spec).flatMap((c) => (c.ports ?? []).map((p: K8s) => p.containerPort));
      expect(ports).toEqual([...new Set(ports)]);
    }
  });

  test('sidecar: the gateway is a native sidecar in front of Triton\'s gRPC on localhost; Triton\'s HTTP is off and its ports apart', () => {
    const objects = rendered.get('sidecar')!;
    const { config } = loadGatewayConfig(objects, 'sidecar');
    const { pod, container } = gatewayOf(objects);
    expect(pod.spec.initContainers).toContain(container);
    expect(container.restartPolicy).toBe('Always');
    const triton = pod.spec.containers.find((c: K8s) => c.name === 'triton');
    const flag = (name: string): string | undefined => (triton.args as string[]).find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
    expect(config.upstream.backends).toEqual([`127.0.0.1:${flag('grpc-port')}`]);
    expect(flag('allow-http')).toBe('false');
    expect(Number(flag('metrics-port'))).not.toBe(config.server.metricsPort);
    expect(triton.image).toMatch(/^nvcr\.io\/nvidia\/tritonserver:\d\d\.\d\d-py3$/);
    // Triton starts only once the sidecar's startup probe passes: it must not wait for Triton.
    expect(container.startupProbe.httpGet.path).toBe('/healthz');
    expect(pod.spec.volumes.find((v: K8s) => v.name === 'shm')?.emptyDir?.medium).toBe('Memory');
  });

  test('ingress: dns:/// backends name the headless Triton Services of this namespace, one per pool; TLS and auth files come from Secrets', () => {
    const objects = rendered.get('ingress')!;
    const { config, files } = loadGatewayConfig(objects, 'ingress');
    const { pod } = gatewayOf(objects);
    const ns = pod.owner.metadata.namespace as string;
    const headless = (name: string): string => {
      const s = objects.find((o) => o.kind === 'Service' && o.spec.clusterIP === 'None' && o.metadata.name === name);
      return `dns:///${s.metadata.name}.${ns}.svc.cluster.local:${s.spec.ports[0].port}`;
    };
    expect(config.upstream.backends).toEqual([headless('triton-headless')]);
    expect(config.upstream.pools.map((p) => [p.name, p.targets])).toEqual([['canary', [headless('triton-canary-headless')]]]);
    expect(config.upstream.models).toEqual([{ model: 'resnet50', split: [{ pool: 'default', weight: 90 }, { pool: 'canary', weight: 10 }], header: 'x-tensorgate-pool' }]);
    expect(config.auth.enabled).toBe(true);
    const secretOf = (key: string): string | undefined => {
      const { container } = gatewayOf(objects);
      return volumeAt(pod, container, path.dirname(files.get(key)!))?.secret?.secretName;
    };
    expect([secretOf('server.tls.cert'), secretOf('server.tls.key'), secretOf('auth.keysFile')]).toEqual(['tensorgate-tls', 'tensorgate-tls', 'tensorgate-auth']);
    expect(files.get('server.tls.cert')).toMatch(/\/tls\.crt$/); // the keys of a kubernetes.io/tls Secret
    expect(files.get('server.tls.key')).toMatch(/\/tls\.key$/);
    expect(gatewayOf(objects).container.lifecycle.preStop.sleep.seconds).toBeGreaterThan(0);
  });

  test('ingress: the HPA scales the gateway on an in-flight metric it exports, with CPU beside it; routes, ServiceMonitor and policy name real ports', () => {
    const objects = rendered.get('ingress')!;
    const { config } = loadGatewayConfig(objects, 'ingress');
    const hpa = objects.find((o) => o.kind === 'HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: gatewayOf(objects).pod.owner.metadata.name });
    expect(gatewayOf(objects).pod.owner.spec.replicas).toBeUndefined();
    const podsMetric = hpa.spec.metrics.find((m: K8s) => m.type === 'Pods').pods;
    expect(METRICS.map(prometheusName)).toContain(podsMetric.metric.name);
    expect(Number(podsMetric.target.averageValue)).toBeLessThan(config.limits.maxInFlightRequests);
    expect(hpa.spec.metrics.find((m: K8s) => m.type === 'Resource')?.resource.name).toBe('cpu');

    const service = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'tensorgate');
    const servicePort = (name: string): K8s => service.spec.ports.find((p: K8s) => p.name === name);
    for (const route of objects.filter((o) => o.kind === 'HTTPRoute' || o.kind === 'GRPCRoute')) {
      for (const ref of route.spec.rules.flatMap((r: K8s) => r.backendRefs)) {
        expect([ref.name, ref.port]).toEqual(['tensorgate', servicePort('http').port]);
      }
    }
    const monitor = objects.find((o) => o.kind === 'ServiceMonitor');
    expect(matches(monitor.spec.selector.matchLabels, service.metadata.labels)).toBe(true);
    expect(monitor.spec.endpoints.map((e: K8s) => [e.port, e.path])).toEqual([['metrics', '/metrics']]);
    expect(servicePort('metrics').port).toBe(config.server.metricsPort);
  });

  test.each(ROLES)('%s: every object is in the overlay\'s namespace; every selector, ref and Service name resolves in the render or to an object expected outside it', (role) => {
    const objects = rendered.get(role)!;
    const report = checkReferences(objects, namespaceOf(role), OUTSIDE[role]);
    expect({ problems: report.problems, unused: report.unused }).toEqual({ problems: [], unused: [] });
    expect(namespaceOf(role)).toBe('inference'); // the config files' *.inference.svc names and the README's commands
    // The checker knows every kind here: each object but ConfigMaps and Secrets refers to something.
    const silent = objects.filter((o) => !['ConfigMap', 'Secret'].includes(o.kind) && !report.followed.some((f) => f.startsWith(`${o.kind}/${o.metadata.name} (`)));
    expect(silent.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([]);
  });

  test('ingress: the reference check refuses the overlay without its namespace (objects left in the current context\'s)', () => {
    const copy = path.join(scratch, 'deploy');
    cpSync(path.join(ROOT, 'deploy'), copy, { recursive: true });
    const file = path.join(copy, 'overlays', 'ingress', 'kustomization.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/^namespace: inference\n/m, ''));
    const report = checkReferences(render('ingress', copy), 'inference', OUTSIDE.ingress);
    const none = "(none: the current context's)";
    const config = report.problems.map((p) => /^ConfigMap\/tensorgate-config-\w+/.exec(p)?.[0]).find((c) => c !== undefined);
    // What the issue saw on a cluster: 8 of 11 objects in the wrong namespace, the gateway resolving
    // a Service that is not there, the HPA, PDB and NetworkPolicy matching nothing.
    expect(report.problems.sort()).toEqual([
      ...['Service/triton-headless', 'Service/triton-canary-headless', 'PodDisruptionBudget/tensorgate', 'HorizontalPodAutoscaler/tensorgate', 'GRPCRoute/tensorgate', 'HTTPRoute/tensorgate',
        'BackendTLSPolicy/tensorgate', 'ServiceMonitor/tensorgate', 'NetworkPolicy/tensorgate', 'PrometheusRule/tensorgate'].map((id) => `${id}: namespace ${none}, not inference`),
      ...['triton-headless', 'triton-canary-headless'].map((s) => `${config} (inference) config.yaml: Service/${s} in inference, but the render has it in ${none}`),
      ...['triton-headless', 'triton-canary-headless'].map((s) => `Service/${s} (${none}): selects pods app.kubernetes.io/name=${s.replace('-headless', '')} in ${none}: none in the render, nor expected outside it`),
      `PodDisruptionBudget/tensorgate (${none}): selects pods app.kubernetes.io/name=tensorgate in ${none}, but the render has them in inference`,
      `HorizontalPodAutoscaler/tensorgate (${none}): Deployment/tensorgate in ${none}, but the render has it in inference`,
      ...['GRPCRoute', 'HTTPRoute'].flatMap((kind) => [
        `${kind}/tensorgate (${none}): Gateway/inference-gateway in ${none} is neither in the render nor expected outside it`,
        `${kind}/tensorgate (${none}): Service/tensorgate in ${none}, but the render has it in inference`,
      ]),
      `BackendTLSPolicy/tensorgate (${none}): Service/tensorgate in ${none}, but the render has it in inference`,
      `BackendTLSPolicy/tensorgate (${none}): ConfigMap/tensorgate-ca in ${none} is neither in the render nor expected outside it`,
      `ServiceMonitor/tensorgate (${none}): selects no Service in ${none}`,
      `ServiceMonitor/tensorgate (${none}): no selected Service has a port named metrics`,
      `NetworkPolicy/tensorgate (${none}): selects pods app.kubernetes.io/name=tensorgate in ${none}, but the render has them in inference`,
      ...['triton', 'triton-canary'].map((n) => `NetworkPolicy/tensorgate (${none}) peer: selects pods app.kubernetes.io/name=${n} in ${none}: none in the render, nor expected outside it`),
    ].sort());
  });

  test('objects expected outside the render are in README "Before you apply", with the command that makes each', () => {
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const section = /^### Before you apply\n([\s\S]*?)(?=^#)/m.exec(readme)?.[1] ?? '';
    const missing = ROLES.flatMap((role) => OUTSIDE[role].filter((o) => !section.includes(o.readme)).map((o) => `${role}: ${o.readme}`));
    expect(missing).toEqual([]);
  });

  needs(KUBECTL()).test('README\'s `kubectl create` commands make the objects the ingress overlay uses, with the keys it reads', () => {
    const objects = rendered.get('ingress')!;
    const { files } = loadGatewayConfig(objects, 'ingress');
    const { pod, container } = gatewayOf(objects);
    // The files each command names, in a scratch directory (the commands read them relative to it).
    const dir = mkdtempSync(path.join(scratch, 'before-'));
    cpSync(pki.server.cert, path.join(dir, 'tls.crt'));
    cpSync(pki.server.key, path.join(dir, 'tls.key'));
    cpSync(pki.ca.cert, path.join(dir, 'ca.crt'));
    writeFileSync(path.join(dir, 'keys.yaml'), 'keys: []\n');
    // Keys each object must hold: the files the gateway's config names in its mount; ca.crt for a
    // BackendTLSPolicy's caCertificateRefs (Gateway API).
    const needs = new Map<string, string[]>([['ConfigMap/tensorgate-ca', ['ca.crt']]]);
    for (const [, file] of files) {
      const secret: string | undefined = volumeAt(pod, container, path.dirname(file))?.secret?.secretName;
      if (secret !== undefined) needs.set(`Secret/${secret}`, [...(needs.get(`Secret/${secret}`) ?? []), path.basename(file)]);
    }
    const made = OUTSIDE.ingress.filter((o) => o.readme.startsWith('kubectl ')).map((o) => {
      const args = o.readme.split(' ').slice(1);
      const r = spawnSync('kubectl', [...args, '--dry-run=client', '-o', 'json'], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
      expect({ command: o.readme, stderr: r.stderr, status: r.status }).toEqual({ command: o.readme, stderr: '', status: 0 });
      const obj = JSON.parse(r.stdout);
      return { id: `${obj.kind}/${obj.metadata.name}`, namespace: obj.metadata.namespace, keys: Object.keys(obj.data ?? {}).sort() };
    });
    expect(made).toEqual(OUTSIDE.ingress.filter((o) => o.readme.startsWith('kubectl ')).map((o) => ({
      id: `${o.kind}/${o.name}`, namespace: 'inference', keys: expect.arrayContaining(needs.get(`${o.kind}/${o.name}`)!),
    })));
  });

  test('shim: declarative and pass-through routes come from the ConfigMap', () => {
    const { config } = loadGatewayConfig(rendered.get('shim')!, 'shim');
    expect(config.routes.map((r) => r.path)).toEqual(['/api/classify', '/api/embed']);
    expect(config.passthrough.map((p) => [p.prefix, p.upstream])).toEqual([['/legacy', 'http://legacy-api.inference.svc.cluster.local:8080']]);
  });
});
