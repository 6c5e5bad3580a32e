import { createHash } from 'node:crypto';
import { API_CATEGORIES } from '../../../gateway/api-access';
import { KeyStore, parseKeyFile } from '../../../gateway/auth/key-file';

const TOKEN = 'tok_live_0123456789abcdef';
const hex = (s: string): string => createHash('sha256').update(s).digest('hex');

function keys(text: string) {
  const r = parseKeyFile(text);
  if ('problems' in r) throw new Error(r.problems.join('; '));
  return r;
}

describe('the key file', () => {
  test('a hashed and a plain token, groups, "*" and models; plain ones are named', () => {
    const r = keys([
      'keys:',
      `  - { id: ci-bot, token: "sha256:${hex(TOKEN)}", groups: [inference, metadata], models: [simple] }`,
      '  - { id: admin, token: plain_admin_token_000, groups: "*" }',
    ].join('\n'));
    expect(r.plain).toEqual(['admin']);
    expect(r.keys.map((k) => [k.subject, [...k.groups], k.models && [...k.models]])).toEqual([
      ['ci-bot', ['inference', 'metadata'], ['simple']],
      ['admin', [...API_CATEGORIES], undefined],
    ]);
    // Only digests are kept.
    expect(r.keys[0]!.digest.toString('hex')).toBe(hex(TOKEN));
    expect(JSON.stringify(r)).not.toContain('plain_admin_token_000');
  });

  test('every problem by key, never quoting a token', () => {
    const r = parseKeyFile([
      'keys:',
      '  - { id: a, token: short_secret, groups: [inference] }',
      '  - { id: a, token: "sha256:abc", groups: [admin] }',
      '  - { id: "b c", token: "has spaces in it, secret!", groups: [inference], models: [], extra: 1 }',
      '  - { id: d, token: same_token_0123456789, groups: [health] }',
      `  - { id: e, token: "sha256:${hex('same_token_0123456789')}", groups: [health] }`,
      '  - { id: f, groups: [health] }',
    ].join('\n'));
    expect(r).toEqual({ problems: [
      'keys[0].token: a plain token must have at least 16 characters',
      'keys[1].id: a is given twice',
      'keys[1].token: sha256: must be followed by 64 hex digits',
      'keys[1].groups: unknown API group "admin" (known: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging)',
      'keys[2].extra: unknown key',
      'keys[2].id: must be 1 to 64 letters, digits or _ . @ : -',
      'keys[2].token: a plain token may hold letters, digits and - . _ ~ + / (then = padding) only',
      'keys[2].models: must be a non-empty list of model names',
      'keys[4].token: the same token as an earlier key',
      'keys[5].token: must be a string: the token, or sha256:<64 hex digits> of it',
    ] });
    for (const secret of ['short_secret', 'secret!', 'same_token_0123456789']) expect(JSON.stringify(r)).not.toContain(secret);
  });

  test('broken YAML names the position only: its line may hold a token', () => {
    const r = parseKeyFile('keys:\n  - { id: a, token: "unterminated_secret_token\n');
    expect('problems' in r && r.problems[0]).toMatch(/^not YAML \([A-Z_]+ at line \d+, column \d+\)$/);
    expect(JSON.stringify(r)).not.toContain('unterminated_secret_token');
    expect(parseKeyFile('- a')).toEqual({ problems: ['must be a mapping with a list `keys`'] });
    expect(parseKeyFile('keys: []\nother: 1')).toEqual({ problems: ['other: unknown key'] });
  });
});

describe('KeyStore', () => {
  const store = new KeyStore(keys([
    'keys:',
    `  - { id: one, token: "sha256:${hex(TOKEN)}", groups: [inference] }`,
    '  - { id: two, token: second_token_0123456789, groups: [health] }',
  ].join('\n')).keys);

  test('finds the key of a token, hashed or plain in the file; nothing else', () => {
    expect(store.match(TOKEN)?.subject).toBe('one');
    expect(store.match('second_token_0123456789')?.subject).toBe('two');
    expect(store.match(`${TOKEN}x`)).toBeUndefined();
    expect(store.match(TOKEN.slice(0, -1))).toBeUndefined();
    expect(store.match(`sha256:${hex(TOKEN)}`)).toBeUndefined(); // the digest is not the token
    expect(store.match('')).toBeUndefined();
  });
});
