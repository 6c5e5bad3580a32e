// The steps of the declarative routes (routes/declarative.ts; docs/dialects.md "Declarative
// routes"): the body's media type chooses how it is read —
//   JSON: read body → decodeDeclarative → ModelInfer (the V1 predict path, pipeline/v1-body.ts)
//   multipart/form-data, a raw body: the V2 uploads path (pipeline/infer-decode.ts decodeUploadBody)
// — and the route's answer is encodeDeclarative's whatever the body was. The route is checked
// against the model's metadata (and, for uploads, its configuration) once per answer of Triton's.
import { type DeclarativeRoute, jsonMediaType, matchesMediaRange, routeMetadataProblems } from '../config/routes';
import { mediaType } from '../decode/framing';
import { deduceRawInput } from '../decode/raw-binary';
import type { MultipartFields } from '../decode/multipart';
import { GatewayError } from '../errors';
import type { ModelMetadata } from '../infer/model-metadata';
import type { InferRequest } from '../infer/request';
import type { Ledger } from '../infer/ledger';
import { requestEncoding } from '../ingress/body';
import { type RequestContext, withParams } from '../ingress/context';
import type { ResponseMessage } from '../upstream/infer/data-plane';
import type { ModelMetadatas } from '../upstream/control/model-metadata';
import { inferCallError } from '../upstream/status';
import type { inference } from '../../proto/services';
import { AnswerStreamer } from './answer-streamer';
import { callTriton } from './infer-answer';
import { decodeUploadBody, type InferPlan } from './infer-decode';
import type { SharedMemoryHold } from './shared-memory-sink';
import { callModelInfer, evictOnNotFound, readWholeBody, startLedger, writeAnswer } from './steps';
import { decodeDeclarativeBody, encodeDeclarativeAnswer, frameAndFill } from './v1-body';

export interface DeclarativeDeps {
  readonly routes: readonly DeclarativeRoute[];
  /** The V2 infer route's plan: uploads (parts, raw bodies) go its way. */
  readonly plan: InferPlan;
  readonly metadata: ModelMetadatas;
}

type Form = 'json' | 'multipart' | 'raw';

/** What a route decides once: its multipart fields, and the model answers it was checked against. */
export interface RouteState {
  readonly fields: MultipartFields;
  /** Checked once per answer (a reloaded model brings new metadata and configuration, checked again). */
  readonly checked: WeakSet<ModelMetadata | inference.ModelConfig>;
}

/** What a route decides once: its parts as the multipart decoder takes them, nothing checked yet. */
export function routeState(route: DeclarativeRoute): RouteState {
  const fields: MultipartFields = {
    owner: `route ${route.path}`,
    inputs: new Map([...route.inputs].flatMap(([name, i]) => (i.part === undefined ? [] : [[i.part, name] as const]))),
    parameters: new Map([...route.parameterParts].map(([name, part]) => [part, name] as const)),
  };
  return { fields, checked: new WeakSet() };
}

/**
 * Which of the route's forms a body of this media type is: multipart/form-data its parts, a type
 * its one input's `body` ranges match (never a JSON one) the raw body, anything else JSON (as
 * before bodies had other forms: clients send JSON under any type). A form the route does not
 * take is 415 naming those it does (RFC 9110 §15.5.16), before anything is read or asked upstream.
 */
export function bodyForm(route: DeclarativeRoute, type: string | undefined): Form {
  const { forms } = route;
  if (type === 'multipart/form-data') {
    if (forms.multipart) return 'multipart';
  } else if (forms.raw !== undefined && !jsonMediaType(type) && matchesMediaRange(forms.raw, type!)) {
    return 'raw';
  } else if (forms.json) {
    return 'json';
  }
  const takes = [
    ...forms.json ? ['a JSON body'] : [],
    ...forms.multipart ? [`multipart/form-data (parts: ${[...route.inputs.values()].map((i) => i.part).concat([...route.parameterParts.values()]).join(', ')})`] : [],
    ...forms.raw !== undefined ? [`a body of type ${forms.raw.join(', ')}`] : [],
  ];
  throw new GatewayError('GW_ERR_DECODE_ROUTE_INVALID', `route ${route.path} takes ${takes.join(' or ')}, not a body of type ${type ?? '(none)'}`, { status: 415 });
}

/** POST <path>: the body read in its form, ModelInfer, the route's answer. */
export async function declarativeInfer(ctx: RequestContext, route: DeclarativeRoute, state: RouteState, deps: DeclarativeDeps): Promise<void> {
  const { checked } = state;
  const { plan } = deps;
  const ledger = startLedger(ctx, route.version);
  ctx.record.model = route.model;
  ctx.record.encoding = 'declarative'; // declarative_base64 once decoding finds base64 fields; multipart, raw
  const form = bodyForm(route, mediaType(ctx.req.headers['content-type']));
  const md = await deps.metadata.get(route.model, route.version, ctx.signal);
  if (!checked.has(md)) {
    const problems = routeMetadataProblems(route, md);
    if (problems.length > 0) throw new GatewayError('GW_ERR_ROUTE_CONFIG_INVALID', problems.join('; '));
    checked.add(md);
  }

  let request: InferRequest;
  let answer: ResponseMessage;
  if (form === 'json') {
    const body = await readWholeBody(ctx, ledger, plan.limits, requestEncoding(ctx.req));
    const decoded = decodeDeclarativeBody(ctx, ledger, body, route, md, plan.limits.maxInputSizeBytes);
    request = decoded.request;
    const message = frameAndFill(ctx, ledger, decoded, body.length);
    answer = await callModelInfer(ctx, plan.dataPlane, message, plan.upstream.timeoutMs, ledger)
      .catch((err: unknown) => {
        throw evictOnNotFound(err, () => deps.metadata.evict(route.model));
      });
  } else {
    ({ request, answer } = await upload(ctx, route, form, state, ledger, deps));
  }

  // The route's answer, whatever the body was: binary outputs read for v1 and map, JSON for v2.
  const parts = encodeDeclarativeAnswer(ledger, answer, route, { ...request, binaryDataOutput: route.response.form !== 'v2' });
  ctx.record.encodingOut = 'json';
  await writeAnswer(ctx, ledger, { 'Content-Type': 'application/json' }, parts, plan.telemetry.serverTiming);
}

/**
 * Parts and raw bodies become tensors as V2's raw requests do (decode/raw-binary.ts deduceRawInput):
 * an input that cannot be deduced (BYTES of dims other than [1], several variable dims) cannot take
 * one — the route's problem, named by its key, not the client's.
 */
function uploadProblems(route: DeclarativeRoute, form: Exclude<Form, 'json'>, config: inference.ModelConfig): string[] {
  const key = form === 'multipart' ? 'part' : 'body';
  const problems: string[] = [];
  for (const input of config.input) {
    if (!route.inputs.has(input.name ?? '')) continue; // the metadata check names it
    try {
      deduceRawInput(input, config.max_batch_size ?? 0, 0);
    } catch (err) {
      const why = (err as Error).message.replace(/^\[request id: [^\]]*\] (.)/, (_m, c: string) => c.toLowerCase());
      problems.push(`route ${route.path}: inputs.${input.name ?? ''}.${key}: a ${form === 'multipart' ? 'part' : 'raw body'} fills it as a raw request does, and ${why}`);
    }
  }
  return problems;
}

/**
 * Parts or a raw body, as V2 infer reads uploads (decode/multipart.ts, the raw path): each tensor
 * deduced from the model configuration, every limit checked as the bytes arrive, a raw body cut
 * through to Triton where the data plane can. The route's model stands in for the path's.
 */
async function upload(ctx: RequestContext, route: DeclarativeRoute, form: Exclude<Form, 'json'>, state: RouteState, ledger: Ledger,
  deps: DeclarativeDeps): Promise<{ request: InferRequest; answer: ResponseMessage }> {
  const { plan } = deps;
  const at: RequestContext = withParams(ctx, [route.model, route.version]);
  let config;
  try {
    config = await plan.configs.get(route.model, route.version, ctx.signal);
  } catch (err) {
    throw inferCallError(err);
  }
  if (!state.checked.has(config)) {
    const problems = uploadProblems(route, form, config);
    if (problems.length > 0) throw new GatewayError('GW_ERR_ROUTE_CONFIG_INVALID', problems.join('; '));
    state.checked.add(config);
  }
  const { fields } = state;
  // The answer is encoded from the whole response (the route's form): nothing is streamed back.
  const streamer = new AnswerStreamer(at, false, plan.telemetry.serverTiming, ledger);
  const shm: SharedMemoryHold = { upload: undefined };
  try {
    const decoded = await decodeUploadBody(at, plan, config, ledger, streamer, shm, [], fields);
    const answer = await callTriton(at, plan, decoded, ledger, streamer, false).catch((err: unknown) => {
      throw evictOnNotFound(err, () => deps.metadata.evict(route.model));
    });
    return { request: decoded.request, answer };
  } finally {
    shm.upload?.release();
  }
}
