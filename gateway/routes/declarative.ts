// Declarative routes (docs/dialects.md "Declarative routes"): POST <path> with a hand-rolled body,
// whose media type chooses how it is read:
//   media type → metadata (checked against the route once) →
//     JSON: read body → decodeDeclarative → ModelInfer (the V1 predict path)
//     multipart/form-data, a raw body: the V2 uploads path (pipeline/infer-decode.ts decodeUploadBody)
//   → encodeDeclarative, the route's answer whatever the body was
// The steps live in pipeline/declarative.ts.
import { exactPath, type Route } from '../ingress/router';
import { type DeclarativeDeps, declarativeInfer, routeState } from '../pipeline/declarative';

export function declarativeRoutes(deps: DeclarativeDeps): Route[] {
  return deps.routes.map((route) => {
    const state = routeState(route);
    return {
      name: `declarative ${route.path}`,
      category: 'inference',
      model: { name: route.model },
      pattern: exactPath(route.path),
      methods: { POST: (ctx) => declarativeInfer(ctx, route, state, deps) },
    } satisfies Route;
  });
}
