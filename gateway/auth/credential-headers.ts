// The request headers that carry a credential the gateway knows: they are the edge's to read and
// never go further (docs/production.md "What the upstream receives"). Every one is removed before a
// pass-through, HTTP (passthrough/http-upstream.ts) or gRPC (passthrough/grpc-ingress.ts), whatever
// the route, its API group (auth.open included) and the outcome of auth, and whether auth is on:
//   - Authorization (RFC 9110 §11.6.2: the bearer token or API key, or any other scheme's
//     credentials, which the gateway cannot tell apart from a client's mistake);
//   - Proxy-Authorization (RFC 9110 §11.7.2: meant for the proxy that asked, the gateway here;
//     hop-by-hop for HTTP anyway, but gRPC metadata has no such notion);
//   - Cookie (RFC 6265): at an edge a session cookie is a credential like any other, and the
//     upstream behind the gateway is not the site that set it;
//   - auth.keyHeader (e.g. X-API-Key);
//   - each api.restricted and upstream.restricted header, as REST sends it (`<key>`) and as gRPC
//     metadata does (`triton-grpc-protocol-<key>`): the restricted-API secrets.
// One list for both pass-throughs: neither keeps a list of its own.
import type { Restriction } from '../api-access';

export interface CredentialSources {
  readonly keyHeader: string;
  /** api.restricted and upstream.restricted. */
  readonly restricted: readonly Restriction[];
}

/** The lower-case names of every credential header. */
export function credentialHeaders(o: CredentialSources): ReadonlySet<string> {
  const names = new Set(['authorization', 'proxy-authorization', 'cookie']);
  if (o.keyHeader !== '') names.add(o.keyHeader.toLowerCase());
  for (const r of o.restricted) {
    names.add(r.key.toLowerCase());
    names.add(`triton-grpc-protocol-${r.key.toLowerCase()}`);
  }
  return names;
}
