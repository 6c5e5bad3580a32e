// A pass-through path as the upstream would read it, made before the route is matched, so that
// a prefix means what it says: `/legacy//admin/x`, `/legacy/./admin/x`, `/legacy/x/../admin/x`
// and `/legacy/%61dmin/x` are all /legacy/admin/x, which a stricter /legacy/admin route then
// matches, and which goes upstream in that one form. RFC 3986 §6.2.2 syntax-based normalisation:
// percent-encoded unreserved characters decoded (§2.3, §6.2.2.2) and the other triplets' hex
// upper-cased (§6.2.2.1), repeated slashes collapsed (servers such as nginx with merge_slashes
// read them as one), dot segments removed (§5.2.4, §6.2.2.3). Refused, as no single reading exists:
// an encoded slash or backslash (one upstream decodes it into a separator, another does not), a
// raw backslash (some servers read it as a slash), a malformed percent-encoding, and dot segments
// that climb out of the prefix they were written under, or above the root.
import { GatewayError } from './errors';

/** A path normalised, or the reason it is refused. */
export type NormalisedPath = { readonly path: string } | { readonly problem: string };

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/** The normalised form of `raw` (a path without its query). */
export function normalisePath(raw: string): NormalisedPath {
  // An absolute-form target (RFC 9112 §3.2.2, "GET http://host/x") is no path to match.
  if (!raw.startsWith('/')) return { problem: 'the request target is not a path' };
  if (raw.includes('\\')) return { problem: 'a backslash in the path' };
  let decoded = '';
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch !== '%') {
      decoded += ch;
      continue;
    }
    const hex = raw.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return { problem: 'a malformed percent-encoding' };
    const c = String.fromCharCode(parseInt(hex, 16));
    if (c === '/' || c === '\\') return { problem: `an encoded ${c === '/' ? 'slash (%2F)' : 'backslash (%5C)'}` };
    decoded += UNRESERVED.test(c) ? c : `%${hex.toUpperCase()}`;
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
