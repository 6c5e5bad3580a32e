// A declarative route's answer (docs/dialects.md "Declarative routes"): V2 JSON, V1 predictions,
// or the route's map of outputs to JSON Pointers.
import { type DeclarativeRoute, pointerTokens } from '../config/routes';
import type { InferRequest } from '../infer/request';
import type { InferResponse } from '../infer/response';
import { encodeInferResponse } from './infer-response';
import { encodeV1Predict } from './v1-predict';

/** Sets a value at a JSON Pointer, creating objects on the way. */
function setPointer(doc: Record<string, unknown>, p: string, value: unknown): void {
  const tokens = pointerTokens(p);
  let o = doc;
  tokens.slice(0, -1).forEach((t) => {
    const next = o[t];
    o = (typeof next === 'object' && next !== null ? next : (o[t] = {})) as Record<string, unknown>;
  });
  o[tokens[tokens.length - 1]!] = value;
}

export function encodeDeclarative(response: InferResponse, route: DeclarativeRoute, request: InferRequest): Buffer[] {
  if (route.response.form === 'v2') {
    const encoded = encodeInferResponse(response, request);
    return [encoded.header, ...encoded.binary];
  }
  if (route.response.form === 'v1') return [encodeV1Predict(response, true)];
  const outs = (JSON.parse(encodeV1Predict(response, false).toString()) as { outputs: unknown }).outputs;
  const byName = response.outputs.length === 1 ? { [response.outputs[0]!.name]: outs } : (outs as Record<string, unknown>);
  const doc: Record<string, unknown> = {};
  for (const [output, p] of route.response.fields) setPointer(doc, p, byName[output]);
  return [Buffer.from(JSON.stringify(doc))];
}
