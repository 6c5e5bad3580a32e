// The OpenAI API's steps up to the Triton call (docs/openai.md): the models a request may name
// (listed, retrieved, picked for an endpoint as the credentials allow), and a generation's body
// read, checked and mapped onto the model's inputs (decode/dialects/openai.ts, its chat templates),
// then framed as one ModelInferRequest. Its errors carry OpenAI's parameter and code
// (GatewayError.dialect), which routes/openai.ts answers in OpenAI's shape.
import { modelRefusal } from '../../auth/guard';
import type { Config } from '../../config/schema';
import type { OpenAiModel } from '../../config/openai';
import { decodeResponses } from '../../decode/dialects/openai-responses';
import { conventionOf, decodeChat, type JsonObject, decodeCompletions, type BuiltInput, type GenerateAsk, generateInputs, invalidParam } from '../../decode/dialects/openai';
import { writeJson } from '../../egress/write';
import { encodeModel, encodeModelList } from '../../encode/openai';
import { GatewayError, isGatewayError } from '../../errors';
import { gather } from '../../infer/gather';
import type { Ledger } from '../../infer/ledger';
import type { Slot } from '../../infer/framed-message';
import type { InferRequest } from '../../infer/request';
import { SlotWriter } from '../../infer/slot-writer';
import { requestEncoding } from '../../ingress/body';
import type { RequestContext } from '../../ingress/context';
import type { ModelConfigs } from '../../upstream/control/model-configs';
import type { StreamInferPlane } from '../../upstream/infer/stream-plane';
import { framer, readWholeBody, releaseStaged, stagingFor, startLedger } from '../steps';

export interface OpenAiDeps {
  readonly prefix: string;
  readonly models: readonly OpenAiModel[];
  readonly streams: StreamInferPlane;
  readonly configs: ModelConfigs;
  /** openai.timeoutMs: the deadline of a generation's whole call (upstream.timeoutMs is for one answer). */
  readonly timeoutMs: number;
  readonly limits: Config['limits'];
  readonly telemetry: Config['telemetry'];
}

/** What the routes' steps run on: the deps, and the models by id. */
export interface OpenAiPlan extends OpenAiDeps {
  readonly byId: ReadonlyMap<string, OpenAiModel>;
}

export function openAiPlan(deps: OpenAiDeps): OpenAiPlan {
  return { ...deps, byId: new Map(deps.models.map((m) => [m.id, m])) };
}

/** Seconds since the epoch when the gateway started: the models' `created`. */
const STARTED = Math.floor(Date.now() / 1000);

/** The models these credentials may call (auth/guard.ts modelRefusal: grants name Triton models). */
function visible(ctx: RequestContext, m: OpenAiModel): boolean {
  return ctx.grant === undefined || modelRefusal(ctx.grant, m.model) === undefined;
}

/** GET models: the models these credentials may call. */
export function listModels(ctx: RequestContext, p: OpenAiPlan): void {
  writeJson(ctx.res, 200, encodeModelList(p.models.filter((m) => visible(ctx, m)).map((m) => ({ id: m.id, created: STARTED }))));
}

/** GET models/{id}: one of them. */
export function retrieveModel(ctx: RequestContext, p: OpenAiPlan): void {
  const id = decodeURIComponentSafe(ctx.params[0]!);
  const m = p.byId.get(id);
  if (m === undefined || !visible(ctx, m)) throw notFound(id);
  writeJson(ctx.res, 200, encodeModel({ id: m.id, created: STARTED }));
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function notFound(id: string, cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_MODEL_OPENAI_UNKNOWN', `The model '${id}' does not exist or you do not have access to it.`,
    { cause, dialect: { shape: 'openai', param: 'model', code: 'model_not_found' } });
}

/** The endpoints, each with the kind of model it serves. */
type Endpoint = GenerateKind | 'embeddings';
const ENDPOINT_NAME: Record<Endpoint, string> = { completion: 'completions', chat: 'chat completions', responses: 'responses', embeddings: 'embeddings' };

/** The generate endpoints: completions, chat completions, and the Responses API (chat's pipeline, its own shapes). */
export type GenerateKind = 'completion' | 'chat' | 'responses';

/** The configured model a request names, of the kind the endpoint serves, that these credentials may call. */
export function pick(ctx: RequestContext, p: OpenAiPlan, id: string, endpoint: Endpoint): OpenAiModel {
  const m = p.byId.get(id);
  if (m === undefined) throw notFound(id);
  // A model the credentials do not cover is refused as Triton's own model check would be, 403;
  // one of another kind is not found, as the model list shows it.
  const refused = ctx.grant === undefined ? undefined : modelRefusal(ctx.grant, m.model);
  const kind = endpoint === 'embeddings' ? 'embedding' : 'generate';
  if (refused !== undefined) throw m.kind === kind ? refused.error : notFound(id);
  if (m.kind !== kind) throw wrongEndpoint(m, endpoint);
  ctx.record.model = m.model;
  return m;
}

/** A listed model sent to an endpoint of the other kind: which one serves it (OpenAI: "This is not a chat model…"). */
function wrongEndpoint(m: OpenAiModel, endpoint: Endpoint): GatewayError {
  const [is, use] = m.kind === 'embedding' ? ['an embedding model', 'the embeddings endpoint'] : ['a text generation model', 'the completions or chat completions endpoint'];
  return invalidParam('model', `The model '${m.id}' is ${is} and thus not supported in the ${ENDPOINT_NAME[endpoint]} endpoint. Did you mean to use ${use}?`,
    endpoint === 'chat' ? 'model_not_chat' : null);
}

/** The model's config at Triton; Triton's own 404 (the configured model is not loaded) is OpenAI's model_not_found. */
export async function modelConfig(ctx: RequestContext, p: OpenAiPlan, m: OpenAiModel): ReturnType<ModelConfigs['get']> {
  try {
    return await p.configs.get(m.model, m.version, ctx.signal);
  } catch (err) {
    if (isGatewayError(err) && err.status === 404) throw notFound(m.id, err);
    throw err;
  }
}

/** The request framed as one ModelInferRequest, each input's bytes copied into its slot. */
export function frame(ctx: RequestContext, ledger: Ledger, request: InferRequest, inputs: readonly BuiltInput[]): Buffer {
  const framed = framer(ctx, ledger, true)(request, []);
  // No input is in shared memory: every one has its slot, filled in order.
  const writer = new SlotWriter(framed.message, framed.slots as readonly Slot[]);
  for (const input of inputs) for (const part of input.parts) writer.write(part);
  ledger.copied('decode', writer.copied);
  return framed.message;
}

export interface Prepared {
  readonly ledger: Ledger;
  /** The Responses API's: what its answer repeats. */
  readonly ask: GenerateAsk & { readonly repeat?: JsonObject };
  readonly model: OpenAiModel;
  /** One framed request per choice (`n`): each generation is a call of its own. */
  readonly messages: readonly Buffer[];
}

/** Reads and checks the body, finds the model and its config, and frames the Triton request. */
export async function prepare(ctx: RequestContext, p: OpenAiPlan, kind: GenerateKind): Promise<Prepared> {
  const ledger = startLedger(ctx, '');
  ctx.record.encoding = `openai_${kind}`;
  const encoding = requestEncoding(ctx.req);
  // Chat images (base64 data: URLs) are decoded while the body arrives (decode/base64/base64-staging.ts).
  const staging = kind === 'chat' ? stagingFor(ctx, p.limits, encoding, true) : undefined;
  const body = await readWholeBody(ctx, ledger, p.limits, encoding, staging);
  ledger.start('decode');
  const staged = staging?.end((nonce, i) => `tensorgate-staged-${nonce}-${i}`);
  let images: Map<string, Buffer> | undefined;
  if (staged !== undefined) {
    ledger.allocated('decode', staged.allocated);
    ledger.copied('decode', staged.copied);
    const bytes = [...staged.staged.values()];
    images = new Map(staged.placeholders.map((p, i) => [p, bytes[i]!]));
  }
  const text = staged?.header ?? gather(body.chunks, body.length);
  // An unknown model is model_not_found before its (missing) template is anything.
  let picked: OpenAiModel | undefined;
  const template = (id: string): OpenAiModel => (picked = pick(ctx, p, id, kind));
  let ask: Prepared['ask'];
  try {
    ask = kind === 'completion' ? decodeCompletions(text) : kind === 'responses' ? decodeResponses(text, template) : decodeChat(text, template, images);
    // A staged data: URL that was not the image (one in a text part, say) holds a placeholder
    // where its text should be: the body is read again as it was sent.
    if (images !== undefined && [...images.values()].some((b) => b !== ask.image)) {
      const original = staging!.original();
      ask = decodeChat(Buffer.concat(original), template);
      ledger.copied('decode', body.length);
    }
  } catch (err) {
    releaseImages(images);
    throw err;
  }
  ledger.copied('decode', ask.copied);
  ledger.end('decode');
  let messages: Buffer[];
  let m: OpenAiModel;
  try {
    m = picked ?? pick(ctx, p, ask.model, kind);
    ctx.record.version = m.version;
    const config = await modelConfig(ctx, p, m);
    ledger.start('decode');
    const convention = conventionOf(m.convention, config, m.id);
    const target = { model: m.model, version: m.version, convention, imageInput: m.imageInput, defaultMaxTokens: m.maxTokens };
    const { request, inputs } = generateInputs(ask, target, config);
    messages = Array.from({ length: ask.n }, () => frame(ctx, ledger, request, inputs));
    ledger.end('decode');
  } finally {
    // The images are in the message now (or unused): their staging buffers go back.
    releaseImages(images);
  }
  ledger.bytes('decode', body.length, messages.reduce((sum, b) => sum + b.length, 0));
  ctx.record.encodingOut = ask.stream ? 'sse' : 'json';
  return { ledger, ask, model: m, messages };
}

function releaseImages(images: ReadonlyMap<string, Buffer> | undefined): void {
  if (images !== undefined) for (const b of images.values()) releaseStaged(b);
}
