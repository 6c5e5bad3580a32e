// Whether one overlay's render holds together as `kubectl apply -k` will create it: every object in
// the overlay's namespace, and every name or selector one object uses to find another resolved to
// an object of the same render in that namespace — or to one the overlay says must exist already
// (`Outside`, listed with how to make it in README "Before you apply"). Checking each object alone
// (schema validation) cannot see any of this: an object without a namespace validates, and then
// lands in whatever namespace the current context has.
//
// What counts as a reference, with the API's own defaults for a missing namespace (the referring
// object's): workload selectors ↔ pod template labels; Service, PodDisruptionBudget and
// NetworkPolicy selectors (and NetworkPolicy peers without a namespaceSelector) → pods; a Service's
// named targetPort → a port of the pods it selects; HPA scaleTargetRef → the workload;
// HTTPRoute/GRPCRoute parentRefs → a Gateway and backendRefs → a Service port; BackendTLSPolicy
// targetRefs → a Service (and its sectionName a port), caCertificateRefs → a ConfigMap and its
// hostname → a Service; ServiceMonitor selector → Services and its endpoint ports; a PrometheusRule →
// a ServiceMonitor in its namespace (its rules read what that one scrapes); volumes,
// env and envFrom → ConfigMaps and Secrets; and every `<service>.<namespace>.svc` name in a
// ConfigMap (the gateway's config file: backends, pass-through upstreams) → a Service and port.
// Peers chosen by namespaceSelector are other namespaces' business and are not followed.

/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-call --
   rendered objects are read field by field; validate.py has checked their shape */
type K8s = any;

/** An object the overlay needs but does not make: by name, or (pods) by labels. */
export interface Outside {
  readonly kind: string;
  readonly name?: string;
  readonly labels?: Readonly<Record<string, string>>;
  /** Ports it must offer (a Service). */
  readonly ports?: readonly number[];
}

/** Kinds without a namespace (none is in our overlays today; listed so one added later is not flagged). */
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PriorityClass', 'StorageClass', 'CustomResourceDefinition',
  'IngressClass', 'GatewayClass', 'PersistentVolume', 'ValidatingWebhookConfiguration', 'MutatingWebhookConfiguration']);
const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job']);
const NONE = '(none: the current context\'s)';

const idOf = (o: K8s): string => `${o.kind}/${o.metadata.name}`;
const nsOf = (o: K8s): string => o.metadata.namespace ?? NONE;
const matches = (selector: Readonly<Record<string, string>>, labels: Readonly<Record<string, string>> | undefined): boolean =>
  Object.entries(selector).every(([k, v]) => labels?.[k] === v);

export interface ReferenceReport {
  /** One line per reference that does not resolve, or object in the wrong namespace. */
  readonly problems: string[];
  /** Outside entries no object referred to (a stale list). */
  readonly unused: Outside[];
  /** Every reference followed, as "from → to" (so a test can see the checker looked). */
  readonly followed: string[];
}

export function checkReferences(objects: readonly K8s[], namespace: string, outside: readonly Outside[]): ReferenceReport {
  const problems: string[] = [];
  const followed: string[] = [];
  const used = new Set<Outside>();

  for (const o of objects) {
    if (!CLUSTER_SCOPED.has(o.kind) && o.metadata.namespace !== namespace) problems.push(`${idOf(o)}: namespace ${nsOf(o)}, not ${namespace}`);
  }
  const workloads = objects.filter((o) => WORKLOADS.has(o.kind));

  /** A named object of `kind` in namespace `ns`, in the render or outside it. */
  const byName = (from: string, kind: string, name: string, ns: string, ports: readonly number[] = []): K8s => {
    const what = `${kind}/${name} in ${ns}`;
    followed.push(`${from} → ${what}`);
    const found = objects.filter((o) => o.kind === kind && o.metadata.name === name);
    const here = found.find((o) => nsOf(o) === ns);
    if (here !== undefined) {
      const missing = ports.filter((p) => !(here.spec?.ports ?? []).some((q: K8s) => q.port === p));
      if (missing.length > 0) problems.push(`${from}: ${what} has no port ${missing.join(', ')}`);
      return here;
    }
    const out = ns === namespace ? outside.find((x) => x.kind === kind && x.name === name) : undefined;
    if (out !== undefined) {
      used.add(out);
      const missing = ports.filter((p) => !(out.ports ?? []).includes(p));
      if (missing.length > 0) problems.push(`${from}: ${what} (expected outside the render) is not listed with port ${missing.join(', ')}`);
      return undefined;
    }
    problems.push(found.length > 0
      ? `${from}: ${what}, but the render has it in ${found.map(nsOf).join(', ')}`
      : `${from}: ${what} is neither in the render nor expected outside it`);
    return undefined;
  };

  /** Pods selected in `ns`: the render's workloads' templates; false when none (nor an outside entry) matches. */
  const podsFor = (from: string, selector: Readonly<Record<string, string>>, ns: string): K8s[] => {
    const label = Object.entries(selector).map(([k, v]) => `${k}=${v}`).join(',');
    followed.push(`${from} → pods ${label} in ${ns}`);
    const here = workloads.filter((w) => nsOf(w) === ns && matches(selector, w.spec.template.metadata?.labels));
    if (here.length > 0) return here;
    const out = ns === namespace ? outside.find((x) => x.kind === 'Pod' && x.labels !== undefined && matches(selector, x.labels)) : undefined;
    if (out !== undefined) used.add(out);
    else {
      const elsewhere = workloads.filter((w) => matches(selector, w.spec.template.metadata?.labels));
      problems.push(elsewhere.length > 0
        ? `${from}: selects pods ${label} in ${ns}, but the render has them in ${elsewhere.map(nsOf).join(', ')}`
        : `${from}: selects pods ${label} in ${ns}: none in the render, nor expected outside it`);
    }
    return [];
  };
  const selectorOf = (s: K8s): Record<string, string> => {
    if (s?.matchExpressions !== undefined) throw new Error('references.ts: matchExpressions are not followed yet; add them here');
    return s?.matchLabels ?? {};
  };

  for (const o of objects) {
    const from = `${idOf(o)} (${nsOf(o)})`;
    const ns = nsOf(o);
    if (WORKLOADS.has(o.kind)) {
      const selector = selectorOf(o.spec.selector);
      if (!matches(selector, o.spec.template.metadata?.labels)) problems.push(`${from}: its selector does not match its own pod template's labels`);
      const spec = o.spec.template.spec;
      for (const v of spec.volumes ?? []) {
        if (v.configMap !== undefined) byName(from, 'ConfigMap', v.configMap.name, ns);
        if (v.secret !== undefined) byName(from, 'Secret', v.secret.secretName, ns);
        for (const s of v.projected?.sources ?? []) {
          if (s.configMap !== undefined) byName(from, 'ConfigMap', s.configMap.name, ns);
          if (s.secret !== undefined) byName(from, 'Secret', s.secret.name, ns);
        }
      }
      for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
        for (const e of c.env ?? []) {
          if (e.valueFrom?.configMapKeyRef !== undefined && e.valueFrom.configMapKeyRef.optional !== true) byName(from, 'ConfigMap', e.valueFrom.configMapKeyRef.name, ns);
          if (e.valueFrom?.secretKeyRef !== undefined && e.valueFrom.secretKeyRef.optional !== true) byName(from, 'Secret', e.valueFrom.secretKeyRef.name, ns);
        }
        for (const e of c.envFrom ?? []) {
          if (e.configMapRef !== undefined) byName(from, 'ConfigMap', e.configMapRef.name, ns);
          if (e.secretRef !== undefined) byName(from, 'Secret', e.secretRef.name, ns);
        }
      }
      for (const s of spec.imagePullSecrets ?? []) byName(from, 'Secret', s.name, ns);
      if (spec.serviceAccountName !== undefined && spec.serviceAccountName !== 'default') byName(from, 'ServiceAccount', spec.serviceAccountName, ns);
    }
    switch (o.kind) {
      case 'Service': {
        if (o.spec.selector === undefined) break; // endpoints managed by hand
        const selected = podsFor(from, o.spec.selector, ns);
        for (const p of o.spec.ports ?? []) {
          if (typeof p.targetPort !== 'string' || selected.length === 0) continue;
          const named = selected.some((w) => [...(w.spec.template.spec.initContainers ?? []), ...w.spec.template.spec.containers]
            .some((c: K8s) => (c.ports ?? []).some((q: K8s) => q.name === p.targetPort)));
          if (!named) problems.push(`${from}: targetPort ${p.targetPort} is no container port of the pods it selects`);
        }
        break;
      }
      case 'HorizontalPodAutoscaler':
        byName(from, o.spec.scaleTargetRef.kind, o.spec.scaleTargetRef.name, ns);
        break;
      case 'PodDisruptionBudget':
        podsFor(from, selectorOf(o.spec.selector), ns);
        break;
      case 'NetworkPolicy': {
        podsFor(from, selectorOf(o.spec.podSelector), ns);
        const peers = [...(o.spec.ingress ?? []).flatMap((r: K8s) => r.from ?? []), ...(o.spec.egress ?? []).flatMap((r: K8s) => r.to ?? [])];
        for (const peer of peers) {
          if (peer.podSelector !== undefined && peer.namespaceSelector === undefined) podsFor(`${from} peer`, selectorOf(peer.podSelector), ns);
        }
        break;
      }
      case 'HTTPRoute':
      case 'GRPCRoute':
        for (const ref of o.spec.parentRefs ?? []) byName(from, ref.kind ?? 'Gateway', ref.name, ref.namespace ?? ns);
        for (const ref of (o.spec.rules ?? []).flatMap((r: K8s) => r.backendRefs ?? [])) {
          byName(from, ref.kind ?? 'Service', ref.name, ref.namespace ?? ns, ref.port === undefined ? [] : [ref.port]);
        }
        break;
      case 'BackendTLSPolicy':
        for (const ref of o.spec.targetRefs ?? []) {
          const svc = byName(from, ref.kind, ref.name, ns);
          if (svc !== undefined && ref.sectionName !== undefined && !svc.spec.ports.some((p: K8s) => p.name === ref.sectionName)) {
            problems.push(`${from}: ${ref.kind}/${ref.name} has no port named ${ref.sectionName}`);
          }
        }
        for (const ref of o.spec.validation?.caCertificateRefs ?? []) byName(from, ref.kind, ref.name, ns);
        serviceNames(from, String(o.spec.validation?.hostname ?? ''));
        break;
      case 'ServiceMonitor': {
        if (o.spec.namespaceSelector !== undefined) break; // other namespaces: not followed
        const selector = selectorOf(o.spec.selector);
        followed.push(`${from} → Services ${JSON.stringify(selector)} in ${ns}`);
        const services = objects.filter((s) => s.kind === 'Service' && nsOf(s) === ns && matches(selector, s.metadata.labels));
        if (services.length === 0) problems.push(`${from}: selects no Service in ${ns}`);
        for (const e of o.spec.endpoints ?? []) {
          if (e.port !== undefined && !services.some((s) => s.spec.ports.some((p: K8s) => p.name === e.port))) problems.push(`${from}: no selected Service has a port named ${e.port}`);
        }
        break;
      }
      case 'PrometheusRule': {
        // Its rules read the series the ServiceMonitor of the same namespace has Prometheus scrape.
        followed.push(`${from} → ServiceMonitor in ${ns}`);
        if (!objects.some((m) => m.kind === 'ServiceMonitor' && nsOf(m) === ns)) problems.push(`${from}: no ServiceMonitor in ${ns} scrapes the series its rules read`);
        break;
      }
      case 'ConfigMap':
        for (const [key, text] of Object.entries(o.data ?? {})) serviceNames(`${from} ${key}`, String(text));
        break;
    }
  }

  /** Every `<service>.<namespace>.svc[.cluster.local][:port]` in `text` names a Service (and port) there. */
  function serviceNames(from: string, text: string): void {
    for (const m of text.matchAll(/(?<![\w.-])([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc(?:\.cluster\.local)?\.?(?::(\d+))?/g)) {
      byName(from, 'Service', m[1]!, m[3]!, m[5] === undefined ? [] : [Number(m[5])]);
    }
  }

  return { problems, unused: outside.filter((x) => !used.has(x)), followed };
}
