// multipart/form-data uploads (RFC 7578; docs/dialects.md "Uploads"), as browsers, `curl -F`,
// Python requests and TorchServe clients send files: each part whose field name names a model
// input becomes that input (a file part of another name goes to a model's only input), its bytes
// deduced into a tensor as a raw request's body is (raw-binary.ts deduceRawInput: a BYTES input
// holds the part as one element). Text fields that
// name no input become string request parameters (`binary_data_output` a bool, as Triton reads it).
// A declarative route names its fields instead (`fields`: each one's input or parameter).
// The parsing is @fastify/busboy's (the undici team's), fed as the body arrives.
//
// A part's length is known only at its closing boundary, and the gRPC message states every
// tensor's length before its bytes: so parts are kept as the chunks they arrived in (no
// concatenation, no base64) and copied once, into their slots, when the body has ended. Every
// limit is checked as the bytes arrive, before they are kept.
import type { IncomingHttpHeaders } from 'node:http';
import { Busboy, type BusboyFileStream, type BusboyInstance } from '@fastify/busboy';
import type { inference } from '../../proto/services';
import { GatewayError } from '../errors';
import type { FramedRequest } from '../infer/framed-message';
import type { InferRequest, InputTensor, ParamValue } from '../infer/request';
import { deduceRawInput } from './raw-binary';

export interface MultipartOptions {
  readonly config: inference.ModelConfig;
  readonly modelName: string;
  readonly modelVersion: string;
  /** limits.maxInputSizeBytes: each part, and all of them together. */
  readonly maxInputSizeBytes: number;
  /** limits.multipartMaxParts. */
  readonly maxParts: number;
  /** Field names that stand for the model's only input (TorchServe's `data` and `body`); without, any file part's. */
  readonly aliases?: readonly string[];
  /** The kind of outputs the request does not list, unless a `binary_data_output` field says. */
  readonly binaryDataOutput: boolean;
  /**
   * A declarative route's parts (docs/dialects.md "Declarative routes"), in place of the names
   * above: each field name stands for the input or the request parameter the route says; any other
   * part is refused, and every input must be given.
   */
  readonly fields?: MultipartFields;
}

export interface MultipartFields {
  /** Who says, for messages: `route /api/upload`. */
  readonly owner: string;
  /** Field name → model input name. */
  readonly inputs: ReadonlyMap<string, string>;
  /** Field name → request parameter name (a text field, sent as a string). */
  readonly parameters: ReadonlyMap<string, string>;
}

/** A request read from a multipart body: its inputs' bytes, aligned with request.inputs. */
export interface MultipartRequest {
  readonly request: InferRequest;
  readonly payloads: readonly (readonly Buffer[])[];
  /** Bytes of every input's data. */
  readonly bytes: number;
}

interface Part {
  readonly input: inference.ModelInput.$Properties;
  readonly chunks: Buffer[];
  length: number;
}

const invalid = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_MULTIPART_INVALID', message);

/** A multipart/form-data body decoded as it arrives: `push(chunk)` …, then `await end()`. */
export class MultipartDecoder {
  readonly #o: MultipartOptions;
  readonly #busboy: BusboyInstance;
  readonly #inputs = new Map<string, inference.ModelInput.$Properties>();
  readonly #parts: Part[] = [];
  readonly #given = new Set<string>();
  readonly #parameters = new Map<string, ParamValue>();
  #binaryDataOutput: boolean;
  #total = 0;
  #open = 0;
  #finished = false;
  #error: GatewayError | undefined;
  #settle: (() => void) | undefined;

  constructor(headers: IncomingHttpHeaders, o: MultipartOptions) {
    this.#o = o;
    this.#binaryDataOutput = o.binaryDataOutput;
    for (const i of o.config.input) this.#inputs.set(i.name ?? '', i);
    try {
      this.#busboy = Busboy({
        headers: headers as IncomingHttpHeaders & { 'content-type': string },
        defCharset: 'utf8',
        // One byte past ours, so a part over the limit is seen (and refused) rather than cut.
        limits: { parts: o.maxParts, fileSize: o.maxInputSizeBytes + 1, fieldSize: o.maxInputSizeBytes + 1, headerPairs: 32 },
      });
    } catch (err) {
      throw invalid(`the multipart/form-data body cannot be read: ${(err as Error).message}`);
    }
    const b = this.#busboy;
    b.on('file', (name, stream) => this.#file(name, stream));
    b.on('field', (name, value, nameTruncated, valueTruncated) => this.#field(name, value, valueTruncated));
    b.on('partsLimit', () => this.#fail(invalid(`the multipart/form-data body has more than ${o.maxParts} parts (limits.multipartMaxParts)`)));
    b.on('error', (err: unknown) => this.#fail(invalid(`the multipart/form-data body is malformed: ${(err as Error).message}`)));
    b.on('finish', () => {
      this.#finished = true;
      this.#check();
    });
  }

  /** The next bytes of the body; throws the first problem found so far (the rest is not read). */
  push(chunk: Buffer): void {
    this.#throwIfFailed();
    this.#busboy.write(chunk);
    this.#throwIfFailed();
  }

  #throwIfFailed(): void {
    const err = this.#error;
    if (err !== undefined) throw err;
  }

  /** Once the whole body was pushed: the request, or the problem that makes it none. */
  end(): Promise<MultipartRequest> {
    return new Promise<void>((resolve) => {
      this.#settle = resolve;
      this.#busboy.end();
      this.#check();
    }).then(() => this.#request());
  }

  #check(): void {
    if ((this.#error !== undefined || (this.#finished && this.#open === 0)) && this.#settle !== undefined) {
      const settle = this.#settle;
      this.#settle = undefined;
      settle();
    }
  }

  #fail(err: GatewayError): void {
    this.#error ??= err;
    this.#check();
  }

  /**
   * The model input a part stands for, or undefined when it names none: the input of its name;
   * else the model's only input for a name in `aliases` (TorchServe) or, without aliases, for any
   * file part (a browser form's `file`).
   */
  #inputFor(name: string, file: boolean): inference.ModelInput.$Properties | undefined {
    const fields = this.#o.fields;
    if (fields !== undefined) return this.#fieldFor(fields, name, file);
    const input = this.#inputs.get(name);
    if (input !== undefined) return input;
    const aliases = this.#o.aliases;
    if (aliases === undefined ? !file : !aliases.includes(name)) return undefined;
    const inputs = this.#o.config.input;
    if (inputs.length === 1) return inputs[0];
    if (aliases === undefined) return undefined;
    throw invalid(`the part '${name}' stands for the only input of the model, and model '${this.#o.modelName}' has ${inputs.length} inputs (${this.#names()}): name each part after its input`);
  }

  /** A declarative route's part: its input, or undefined for a parameter's text field; any other is refused. */
  #fieldFor(fields: MultipartFields, name: string, file: boolean): inference.ModelInput.$Properties | undefined {
    const inputName = fields.inputs.get(name);
    if (inputName !== undefined) {
      const input = this.#inputs.get(inputName);
      if (input === undefined) throw invalid(`${fields.owner}: the part '${name}' fills input '${inputName}', and model '${this.#o.modelName}' has none (its inputs: ${this.#names()})`);
      return input;
    }
    if (fields.parameters.has(name)) {
      if (file) throw invalid(`${fields.owner}: the part '${name}' is the request parameter '${fields.parameters.get(name)!}': send it as a text field, not a file`);
      return undefined;
    }
    const known = [...fields.inputs.keys(), ...fields.parameters.keys()].map((f) => `'${f}'`).join(', ');
    throw invalid(`${fields.owner} takes no part '${name}' (its parts: ${known})`);
  }

  #names(): string {
    return this.#o.config.input.map((i) => `'${i.name ?? ''}'`).join(', ');
  }

  #take(name: string, input: inference.ModelInput.$Properties): Part {
    const key = input.name ?? '';
    if (this.#given.has(key)) throw invalid(`the multipart/form-data body gives input '${key}' twice (part '${name}')`);
    this.#given.add(key);
    const part: Part = { input, chunks: [], length: 0 };
    this.#parts.push(part);
    return part;
  }

  /** Counts a part's next bytes against the limits before they are kept. */
  #count(name: string, part: Part, n: number): void {
    part.length += n;
    this.#total += n;
    const max = this.#o.maxInputSizeBytes;
    if (part.length > max) throw invalid(`the part '${name}' is larger than ${max} bytes (limits.maxInputSizeBytes)`);
    if (this.#total > max) throw invalid(`the parts of the multipart/form-data body hold more than ${max} bytes together (limits.maxInputSizeBytes)`);
  }

  #file(name: string, stream: BusboyFileStream): void {
    // A part cut short is reported on its stream (and would be an uncaught 'error' without this).
    stream.on('error', (err: Error) => this.#fail(invalid(`the multipart/form-data body is malformed: ${err.message}`)));
    let part: Part;
    try {
      const input = this.#inputFor(name, true);
      if (input === undefined) throw invalid(`the file part '${name}' names no input of model '${this.#o.modelName}' (its inputs: ${this.#names()})`);
      part = this.#take(name, input);
    } catch (err) {
      stream.resume();
      this.#fail(err as GatewayError);
      return;
    }
    this.#open += 1;
    stream.on('data', (chunk: Buffer) => {
      if (this.#error !== undefined) return;
      try {
        this.#count(name, part, chunk.length);
        part.chunks.push(chunk);
      } catch (err) {
        this.#fail(err as GatewayError);
      }
    });
    stream.on('end', () => {
      this.#open -= 1;
      this.#check();
    });
  }

  #field(name: string, value: string, truncated: boolean): void {
    if (this.#error !== undefined) return;
    try {
      if (truncated) throw invalid(`the field '${name}' is larger than ${this.#o.maxInputSizeBytes} bytes (limits.maxInputSizeBytes)`);
      const input = this.#inputFor(name, false);
      if (input === undefined) {
        this.#parameter(name, value);
        return;
      }
      const part = this.#take(name, input);
      const bytes = Buffer.from(value, 'utf8');
      this.#count(name, part, bytes.length);
      part.chunks.push(bytes);
    } catch (err) {
      this.#fail(err as GatewayError);
    }
  }

  /** A text field naming no input: a string request parameter; `binary_data_output` as Triton reads it. */
  #parameter(field: string, value: string): void {
    const name = this.#o.fields?.parameters.get(field) ?? field;
    if (name === 'binary_data_output' && this.#o.fields === undefined) {
      if (value !== 'true' && value !== 'false') throw invalid(`the field 'binary_data_output' must be true or false, got '${value}'`);
      this.#binaryDataOutput = value === 'true';
      return;
    }
    if (this.#parameters.has(name)) throw invalid(`the multipart/form-data body gives parameter '${name}' twice`);
    this.#parameters.set(name, { type: 'string', value });
  }

  #request(): MultipartRequest {
    this.#throwIfFailed();
    const fields = this.#o.fields;
    for (const [field, input] of fields?.inputs ?? []) {
      if (!this.#given.has(input)) throw invalid(`${fields!.owner}: inputs.${input}.part: the body has no part '${field}'`);
    }
    if (this.#parts.length === 0) {
      throw invalid(`no part of the multipart/form-data body names an input of model '${this.#o.modelName}' (its inputs: ${this.#names()})`);
    }
    const batch = this.#o.config.max_batch_size ?? 0;
    const inputs: InputTensor[] = this.#parts.map((p) => deduceRawInput(p.input, batch, p.length));
    return {
      request: {
        modelName: this.#o.modelName,
        modelVersion: this.#o.modelVersion,
        id: undefined,
        parameters: this.#parameters,
        inputs,
        outputs: undefined,
        binaryDataOutput: this.#binaryDataOutput,
      },
      payloads: this.#parts.map((p) => p.chunks),
      bytes: this.#total,
    };
  }
}

/** Copies each input's bytes into its slot (a BYTES element after its 4-byte length, as Triton frames it). */
export function fillMultipart(framed: FramedRequest, m: MultipartRequest): void {
  m.request.inputs.forEach((input, i) => {
    let at = framed.slots[i]!.offset;
    const chunks = m.payloads[i]!;
    if (input.datatype === 'BYTES') {
      framed.message.writeUInt32LE(input.byteSize! - 4, at);
      at += 4;
    }
    for (const c of chunks) at += c.copy(framed.message, at);
  });
}
