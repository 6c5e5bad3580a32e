#!/usr/bin/env node
// Generates proto/generated/inference.{js,d.ts} (protobufjs static code) from proto/*.proto.
// The output is committed so a fresh clone builds without this step; `.ci/run` regenerates it
// and fails when the committed copy is stale.
'use strict';
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const fs = require('node:fs');

const root = path.resolve(__dirname, '..');
const outDir = path.join(root, 'proto', 'generated');
fs.mkdirSync(outDir, { recursive: true });
const pbjs = path.join(root, 'node_modules', 'protobufjs-cli', 'bin', 'pbjs');

execFileSync(process.execPath, [
  pbjs,
  '--target', 'static-module',
  '--wrap', 'commonjs',
  '--dependency', 'protobufjs/minimal.js',
  '--keep-case',          // protocol words stay as the protocol spells them: raw_input_contents
  '--no-verify', '--no-delimited', '--no-typeurl', '--no-service',
  '--path', path.join(root, 'proto'),
  '--out', path.join(outDir, 'inference.js'),
  '--dts',
  path.join(root, 'proto', 'inference.proto'),
  path.join(root, 'proto', 'model_config.proto'),
  path.join(root, 'proto', 'health.proto'),
], { stdio: 'inherit', cwd: root });

// The JSON descriptor of the model configuration: encode/model-config.ts walks it to print
// GET /config exactly as Triton does (declaration order, defaults, enum names).
execFileSync(process.execPath, [
  pbjs,
  '--target', 'json',
  '--keep-case',
  '--path', path.join(root, 'proto'),
  '--out', path.join(outDir, 'model-config.json'),
  path.join(root, 'proto', 'model_config.proto'),
], { stdio: 'inherit', cwd: root });
