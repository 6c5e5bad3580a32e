#!/usr/bin/env node
// Writes the JSON schemas of the custom resources deploy/ uses, from the CRDs their projects
// publish, fetched as Go modules (the Go module proxy carries each release's tree):
//
//   node deploy/schemas/vendor.js      # needs go; rewrites deploy/schemas/*.json
//
// Each schema is the CRD version's openAPIV3Schema as JSON Schema: descriptions dropped, apiVersion
// and kind pinned, and additionalProperties: false wherever the CRD lists properties and does not
// keep unknown fields, as the API server's strict field validation (kubectl's default) refuses
// unknown fields. CEL rules (x-kubernetes-validations) are not checked.
'use strict';
const { execFileSync } = require('node:child_process');
const { mkdtempSync, readFileSync, writeFileSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');
const { parse } = require('yaml');

const SOURCES = [
  { module: 'sigs.k8s.io/gateway-api', version: 'v1.2.1', crd: 'config/crd/standard/gateway.networking.k8s.io_httproutes.yaml', served: 'v1' },
  { module: 'sigs.k8s.io/gateway-api', version: 'v1.2.1', crd: 'config/crd/standard/gateway.networking.k8s.io_grpcroutes.yaml', served: 'v1' },
  { module: 'sigs.k8s.io/gateway-api', version: 'v1.2.1', crd: 'config/crd/experimental/gateway.networking.k8s.io_backendtlspolicies.yaml', served: 'v1alpha3' },
  { module: 'github.com/prometheus-operator/prometheus-operator', version: 'v0.77.1',
    crd: 'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml', served: 'v1' },
  { module: 'github.com/prometheus-operator/prometheus-operator', version: 'v0.77.1',
    crd: 'example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml', served: 'v1' },
];

/** A schema node: its keywords converted, its sub-schemas walked. */
function convert(node) {
  if (Array.isArray(node)) return node.map(convert);
  if (typeof node !== 'object' || node === null) return node;
  const out = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'description') continue;
    if (k === 'properties') out[k] = Object.fromEntries(Object.entries(v).map(([name, s]) => [name, convert(s)]));
    else if (k === 'default' || k === 'enum' || k === 'example') out[k] = v;
    else out[k] = convert(v);
  }
  if (out.properties !== undefined && out.additionalProperties === undefined && out['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

const here = __dirname;
const modcache = mkdtempSync(path.join(tmpdir(), 'tensorgate-crds-'));
try {
  const dirs = new Map();
  const index = [];
  for (const s of SOURCES) {
    const at = `${s.module}@${s.version}`;
    if (!dirs.has(at)) {
      const info = JSON.parse(execFileSync('go', ['mod', 'download', '-json', at], {
        env: { ...process.env, GOMODCACHE: modcache, GOFLAGS: '-mod=mod' }, encoding: 'utf8',
      }));
      dirs.set(at, info.Dir);
    }
    const crd = parse(readFileSync(path.join(dirs.get(at), s.crd), 'utf8'));
    const version = crd.spec.versions.find((v) => v.name === s.served);
    const schema = convert(version.schema.openAPIV3Schema);
    schema.properties.apiVersion = { const: `${crd.spec.group}/${s.served}` };
    schema.properties.kind = { const: crd.spec.names.kind };
    schema.properties.metadata = { type: 'object' };
    schema.required = [...new Set(['apiVersion', 'kind', ...(schema.required ?? [])])];
    delete schema.properties.status;
    const file = `${crd.spec.names.kind.toLowerCase()}-${crd.spec.group.split('.')[0]}-${s.served}.json`;
    writeFileSync(path.join(here, file), JSON.stringify({ $schema: 'https://json-schema.org/draft/2020-12/schema', ...schema }) + '\n');
    index.push({ file, apiVersion: `${crd.spec.group}/${s.served}`, kind: crd.spec.names.kind, from: `${at} ${s.crd}` });
  }
  writeFileSync(path.join(here, 'index.json'), JSON.stringify(index, null, 2) + '\n');
  for (const e of index) console.log(`${e.file}: ${e.apiVersion} ${e.kind} from ${e.from}`);
} finally {
  execFileSync('chmod', ['-R', 'u+w', modcache]);
  rmSync(modcache, { recursive: true, force: true });
}
