// A pass-through path as the upstream would read it, made before the route is matched, so that
// a prefix means what it says: `/legacy//admin/x`, `/legacy/./admin/x`, `/legacy/x/../admin/x`,
// `/legacy/%61dmin/x` and `/legacy/%61dmin%3Ax` are /legacy/admin/x and /legacy/admin:x, which a
// stricter route then matches, and which go upstream in that one form. RFC 3986 §6.2.2
// normalisation taken as far as it goes: every percent-encoded character that may stand in a path
// as itself (pchar, §3.3: unreserved, sub-delims, ':' and '@') is decoded — an upstream decodes
// them before it routes, so a prefix holding ':' or '@' cannot be dodged by encoding it — and the
// other triplets' hex upper-cased (§6.2.2.1); repeated slashes collapsed (servers such as nginx
// with merge_slashes read them as one); dot segments removed (§5.2.4, §6.2.2.3).
//
// Refused, as no single reading exists:
//   - any character that is not pchar, '/' or a percent-encoding: '#' (nginx and uvicorn end the
//     path there, Node's parser does not), a raw space, a backslash (some servers read it as a
//     slash), a byte outside ASCII;
//   - ';', raw or encoded: Java servers (Tomcat, Jetty, Spring) read `;…` as a path parameter and
//     drop it, so /legacy/admin;x/secret and /legacy/..;/admin/secret are /legacy/admin/secret to
//     them (RFC 3986 §3.3 leaves the meaning of ';' to the scheme);
//   - an encoded slash or backslash (one upstream decodes it into a separator, another does not),
//     an encoded '%' (%25: a second decoding upstream, as of %252e, would be a second path), an
//     encoded control character, and a malformed percent-encoding;
//   - dot segments that climb out of the prefix they were written under, or above the root.
import { GatewayError } from '../errors';

/** A path normalised, or the reason it is refused. */
export type NormalisedPath = { readonly path: string } | { readonly problem: string };

/** pchar less ';' (refused) and '%' (a triplet's start): what stands in a normalised path as itself, with '/'. */
const LITERAL = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]$/;

/** The normalised form of `raw` (a path without its query). */
export function normalisePath(raw: string): NormalisedPath {
  // An absolute-form target (RFC 9112 §3.2.2, "GET http://host/x") is no path to match.
  if (!raw.startsWith('/')) return { problem: 'the request target is not a path' };
  let decoded = '';
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch === ';') return { problem: "a ';' in the path (a path parameter to Java servers)" };
    if (ch !== '%') {
      if (!LITERAL.test(ch)) return { problem: `${describe(ch)} in the path (RFC 3986 §3.3 allows only pchar and '/')` };
      decoded += ch;
      continue;
    }
    const hex = raw.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return { problem: 'a malformed percent-encoding' };
    const code = parseInt(hex, 16);
    const c = String.fromCharCode(code);
    if (c === '/' || c === '\\') return { problem: `an encoded ${c === '/' ? 'slash (%2F)' : 'backslash (%5C)'}` };
    if (c === '%') return { problem: "an encoded '%' (%25)" };
    if (code < 0x20 || code === 0x7f) return { problem: `an encoded control character (%${hex.toUpperCase()})` };
    if (c === ';') return { problem: "an encoded ';' (%3B, a path parameter to Java servers once decoded)" };
    decoded += LITERAL.test(c) ? c : `%${hex.toUpperCase()}`;
    i += 2;
  }
  const segments = decoded.replace(/\/{2,}/g, '/').split('/').slice(1);
  const out: string[] = [];
  for (const [k, s] of segments.entries()) {
    const last = k === segments.length - 1;
    if (s === '.' || s === '..') {
      if (s === '..' && out.pop() === undefined) return { problem: 'dot segments above the root' };
      if (last) out.push(''); // "/a/b/.." is "/a/" (RFC 3986 §5.2.4 step 2C)
      continue;
    }
    out.push(s);
  }
  return { path: `/${out.join('/')}` };
}

/** A refused character as the message names it. */
function describe(ch: string): string {
  if (ch === '\\') return 'a backslash';
  if (ch === ' ') return 'a space';
  const code = ch.charCodeAt(0);
  return code < 0x21 || code > 0x7e ? `the byte 0x${code.toString(16).padStart(2, '0')}` : `a '${ch}'`;
}

/** Whether `path` is `prefix` or below it (a whole segment: /legacy-x is not under /legacy). */
export const isUnder = (path: string, prefix: string): boolean => path === prefix || path.startsWith(`${prefix}/`);

/**
 * A pass-through route's pattern: the router hands it the raw path (ingress/router.ts), and it
 * matches when the normalised path is under the prefix. It throws GW_ERR_PASSTHROUGH_PATH_INVALID
 * for a path written under the prefix that cannot be normalised, or whose dot segments leave it.
 */
export class NormalisedPrefix extends RegExp {
  constructor(readonly prefix: string) {
    super(`^${prefix.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}(?:/.*)?$`);
  }

  override exec(raw: string): RegExpExecArray | null {
    const n = normalisePath(raw);
    const written = isUnder(raw.replace(/\/{2,}/g, '/'), this.prefix);
    if ('problem' in n) {
      if (written) throw invalid(n.problem);
      return null;
    }
    if (isUnder(n.path, this.prefix)) return super.exec(n.path);
    if (written) throw invalid(`its dot segments leave ${this.prefix}`);
    return null;
  }
}

const invalid = (problem: string): GatewayError => new GatewayError('GW_ERR_PASSTHROUGH_PATH_INVALID', `the path is refused: ${problem}`);
