// Preloaded (--require) by test/integration/cli.test.ts: this process reports itself as a Node
// just older than package.json's engines, so gateway/node-version.ts refuses to start.
Object.defineProperty(process.versions, 'node', { value: '22.14.9' });
