#!/usr/bin/env node
// tsc does not emit the generated JavaScript (it type-checks against the .d.ts beside it),
// so the build copies it next to the compiled code that requires it.
'use strict';
const fs = require('node:fs');
const path = require('node:path');
const root = path.resolve(__dirname, '..');
const from = path.join(root, 'proto', 'generated');
const to = path.join(root, 'dist', 'proto', 'generated');
fs.mkdirSync(to, { recursive: true });
for (const f of fs.readdirSync(from)) if (f.endsWith('.js') || f.endsWith('.json')) fs.copyFileSync(path.join(from, f), path.join(to, f));
