// The one protobuf reader the gRPC pass-through has: what a request message says about the model
// it names (and, for the calls that have them, its sequence, its repository parameters, the
// shared-memory regions it names), read as protobuf (and so Triton) parses it: fields in any
// order, the last copy of a field winning (the protobuf encoding guide, "Last One Wins"), a field
// of the wrong wire type skipped as an unknown one, a map's last entry for a key winning. Nothing
// of a message is kept or copied but the few fields asked for.
//
// The reader is pushed the message's bytes as they pass (grpc/envelope.ts EnvelopeScanner), so a
// message is known whole the moment its last byte has passed: the caller decides before that
// chunk is forwarded, and Triton never receives the last byte of a message the gateway refuses.
// What it cannot read as protobuf would (a group, a malformed field, a name longer than
// MAX_NAME_BYTES or not UTF-8; a compressed message, which the scanner never gives it) is reported
// as unreadable, never guessed.
import { isUtf8 } from 'node:buffer';
import { I32, I64, LEN, PushVarint, VARINT, varint64, WireReader } from './wire';

/**
 * The longest model name the reader keeps (bytes). A longer one is reported unreadable: Triton's
 * model names are directory names (255 bytes on common file systems).
 */
export const MAX_NAME_BYTES = 1024;
/**
 * The largest ModelInferRequest.parameters entry read for a `sequence_id` (bytes); a larger entry
 * makes the sequence unknown (the call is then placed round robin).
 */
export const MAX_PARAMETER_ENTRY_BYTES = 4096;

/** Which fields of a request message are read; the others are skipped as they pass. */
export interface MessageFields {
  /** The string field naming the model (1 in most requests, 2 in the repository and trace ones); 0: none. */
  readonly name: number;
  /** Read ModelInferRequest.parameters (field 4, map<string, InferParameter>) for a `sequence_id`. */
  readonly sequence: boolean;
  /**
   * The repository requests' parameters (field 3, map<string, ModelRepositoryParameter>): counted,
   * and `unload_dependents` read.
   */
  readonly repositoryParameters?: boolean;
  /**
   * With upstream.sharedMemory on, whether a region is the gateway's (decode/control/shared-memory.ts
   * isReservedRegion): a ModelInferRequest's input and output tensors (fields 5 and 6) are walked
   * for a `shared_memory_region` parameter it holds true for (their parameters: field 4 of
   * InferInputTensor, 2 of InferRequestedOutputTensor), their contents skipped.
   */
  readonly reservedRegion?: (name: string) => boolean;
  /** Another string field kept as `key` (SystemSharedMemoryRegisterRequest.key, 2); 0 or unset: none. */
  readonly key?: number;
}

/** What a request message says, as protobuf reads it. */
export interface MessageFacts {
  /**
   * The name field's last value, '' when the message has none (proto3 omits an empty string);
   * undefined when it cannot be told (`unreadable` says why).
   */
  readonly name: string | undefined;
  readonly unreadable?: string;
  /** The message's sequence (pipeline/steps.ts sequenceKey's form), when `sequence` was asked and it names one. */
  readonly sequenceKey?: string;
  /** With `repositoryParameters`: how many parameters entries the message has. */
  readonly parameterCount?: number;
  /**
   * With `repositoryParameters`: an entry `unload_dependents` sets bool_param true, or an entry
   * cannot be read (too large, malformed): Triton might unload the model's dependents.
   */
  readonly unloadDependents?: boolean;
  /**
   * With `reservedRegion`: the first `shared_memory_region` a tensor names under it, or
   * `undefined` when none does; '' when a tensor's parameters entry cannot be read (too large,
   * malformed): it might.
   */
  readonly reservedRegion?: string;
  /** With `key`: the key field's last value ('' when absent); undefined when it cannot be read. */
  readonly key?: string;
}

/** The facts of one whole message in `b[from, to)` (the same reader, fed at once). */
export function readMessage(b: Buffer, from: number, to: number, fields: MessageFields): MessageFacts {
  const r = new MessageReader(fields);
  r.begin(to - from);
  r.push(b, from, to);
  return r.end();
}

const enum Stage { Tag, Value, Length, Skip, Keep }
/** Field 4 of ModelInferRequest: map<string, InferParameter> parameters. */
const PARAMETERS = 4;
/** ModelInferRequest's inputs (5: InferInputTensor, parameters 4) and outputs (6: …OutputTensor, parameters 2). */
const INPUTS = 5;
const OUTPUTS = 6;
const INPUT_PARAMETERS = 4;
const OUTPUT_PARAMETERS = 2;
/** Field 3 of RepositoryModelLoadRequest and …UnloadRequest: map<string, ModelRepositoryParameter> parameters. */
const REPOSITORY_PARAMETERS = 3;

/** A push reader over one message at a time: begin(length), push() its bytes in any pieces, end(). */
export class MessageReader {
  #stage = Stage.Tag;
  /** The varint being read (a tag, a length, a value). */
  readonly #varint = new PushVarint();
  #field = 0;
  /** Bytes of the current field's value still to skip or keep. */
  #left = 0;
  /** Bytes of the message after the current position. */
  #remaining = 0;
  #keep: Buffer | undefined;
  #kept = 0;
  #name: Buffer | undefined;
  #problem: string | undefined;
  /** The sequence_id parameter's value (`n:`/`s:`), undefined when none or 0/""; #seqUnknown: it cannot be told. */
  #seq: string | undefined;
  #seqUnknown = false;
  #repositoryParameters = 0;
  #unloadDependents = false;
  /** Inside an input (5) or output (6) tensor of a ModelInferRequest; 0: at the message's top level. */
  #tensor = 0;
  /** #remaining where the current tensor ends. */
  #tensorEnd = 0;
  #reservedRegion: string | undefined;
  #keyValue: Buffer | undefined;

  constructor(private readonly fields: MessageFields) {}

  begin(length: number): void {
    this.#stage = Stage.Tag;
    this.#varint.reset();
    this.#remaining = length;
    this.#name = undefined;
    this.#problem = undefined;
    this.#seq = undefined;
    this.#seqUnknown = false;
    this.#repositoryParameters = 0;
    this.#unloadDependents = false;
    this.#tensor = 0;
    this.#tensorEnd = 0;
    this.#reservedRegion = undefined;
    this.#keyValue = undefined;
  }

  push(b: Buffer, from: number, to: number): void {
    let i = from;
    while (i < to && this.#problem === undefined) {
      switch (this.#stage) {
        case Stage.Skip: case Stage.Keep: {
          const take = Math.min(this.#left, to - i);
          if (this.#stage === Stage.Keep) this.#kept += b.copy(this.#keep!, this.#kept, i, i + take);
          i += take;
          this.#left -= take;
          this.#remaining -= take;
          if (this.#left === 0) this.#valueEnded();
          break;
        }
        default: {
          // A tensor's last field has ended: the message's own fields follow.
          if (this.#tensor !== 0 && this.#stage === Stage.Tag && this.#varint.length === 0 && this.#remaining === this.#tensorEnd) this.#tensor = 0;
          const byte = b[i++]!;
          this.#remaining--;
          if (this.#tensor !== 0 && this.#remaining < this.#tensorEnd) {
            this.#problem = 'a field runs past the end of its tensor';
            break;
          }
          // Tags and lengths are 32-bit: five bytes here. Protobuf's C++ parser also takes them
          // padded to ten bytes (the high bits dropped); such a message is unreadable here,
          // refused to model-limited credentials rather than guessed. A value may take ten.
          const max = this.#stage === Stage.Value ? 10 : 5;
          if (!this.#varint.add(byte)) {
            if (this.#varint.length >= max) this.#problem = 'a varint is too long';
            break;
          }
          const v = this.#varint.value;
          this.#varint.reset();
          this.#varintEnded(v);
        }
      }
    }
  }

  #varintEnded(v: number): void {
    if (this.#stage === Stage.Value) {
      this.#stage = Stage.Tag;
      return;
    }
    if (this.#stage === Stage.Length) {
      if (v > this.#remaining - (this.#tensor === 0 ? 0 : this.#tensorEnd)) {
        this.#problem = 'a field runs past the end of the message';
        return;
      }
      this.#startValue(v);
      return;
    }
    // A tag: field number and wire type (the protobuf encoding guide).
    if (v > 0xffffffff) {
      this.#problem = 'a tag is too large';
      return;
    }
    this.#field = Math.floor(v / 8);
    const wire = v % 8;
    if (this.#field === 0) this.#problem = 'field number 0';
    else if (wire === VARINT) this.#stage = Stage.Value;
    else if (wire === I64 || wire === I32) this.#startSkip(wire === I64 ? 8 : 4);
    else if (wire === LEN) this.#stage = Stage.Length;
    // Groups (3, 4) are skipped by protobuf as unknown fields, with their nesting; not read here.
    else this.#problem = wire === 3 || wire === 4 ? 'a group' : `wire type ${wire}`;
  }

  #startSkip(n: number): void {
    if (n > this.#remaining - (this.#tensor === 0 ? 0 : this.#tensorEnd)) {
      this.#problem = 'a field runs past the end of the message';
      return;
    }
    this.#keep = undefined;
    this.#left = n;
    this.#stage = Stage.Skip;
    if (n === 0) this.#valueEnded();
  }

  /** A length-delimited value of `n` bytes begins: kept when it is a field asked for, skipped otherwise. */
  #startValue(n: number): void {
    const f = this.fields;
    if (this.#tensor !== 0) {
      // A tensor's parameters entry is kept (bounded), anything else of it (contents) skipped.
      if (this.#field !== (this.#tensor === INPUTS ? INPUT_PARAMETERS : OUTPUT_PARAMETERS)) {
        this.#startSkip(n);
      } else if (n > MAX_PARAMETER_ENTRY_BYTES) {
        this.#reservedRegion ??= '';
        this.#startSkip(n);
      } else {
        this.#keepValue(n);
      }
      return;
    }
    if (f.reservedRegion !== undefined && (this.#field === INPUTS || this.#field === OUTPUTS) && n > 0) {
      // Into the tensor: its fields are read as they pass, as the message's are.
      this.#tensor = this.#field;
      this.#tensorEnd = this.#remaining - n;
      this.#stage = Stage.Tag;
      return;
    }
    if (f.key !== undefined && f.key !== 0 && this.#field === f.key) {
      if (n > MAX_NAME_BYTES) {
        this.#problem = `the key is longer than ${MAX_NAME_BYTES} bytes`;
        return;
      }
      this.#keepValue(n);
      return;
    }
    if (f.name !== 0 && this.#field === f.name) {
      if (n > MAX_NAME_BYTES) {
        this.#name = undefined;
        this.#problem = `the model name is longer than ${MAX_NAME_BYTES} bytes`;
        return;
      }
      this.#keepValue(n);
      return;
    }
    if (f.sequence && this.#field === PARAMETERS) {
      if (n > MAX_PARAMETER_ENTRY_BYTES) {
        this.#seqUnknown = true;
        this.#startSkip(n);
        return;
      }
      this.#keepValue(n);
      return;
    }
    if (f.repositoryParameters === true && this.#field === REPOSITORY_PARAMETERS) {
      this.#repositoryParameters++;
      if (n > MAX_PARAMETER_ENTRY_BYTES) {
        this.#unloadDependents = true; // not read: assume the worst
        this.#startSkip(n);
        return;
      }
      this.#keepValue(n);
      return;
    }
    this.#startSkip(n);
  }

  #keepValue(n: number): void {
    this.#keep = Buffer.allocUnsafe(n); // n is bounded above: MAX_NAME_BYTES or MAX_PARAMETER_ENTRY_BYTES
    this.#kept = 0;
    this.#left = n;
    this.#stage = Stage.Keep;
    if (n === 0) this.#valueEnded();
  }

  #valueEnded(): void {
    const kept = this.#stage === Stage.Keep ? this.#keep! : undefined;
    this.#stage = Stage.Tag;
    this.#keep = undefined;
    if (kept === undefined) return;
    if (this.#tensor !== 0) this.#tensorParameter(kept);
    else if (this.fields.key !== undefined && this.fields.key !== 0 && this.#field === this.fields.key) this.#keyValue = kept;
    else if (this.#field === this.fields.name) this.#name = kept;
    else if (this.#field === REPOSITORY_PARAMETERS && this.fields.repositoryParameters === true) this.#repositoryParameter(kept);
    else this.#parameter(kept);
  }

  /** A tensor's parameters entry (key 1, value 2: InferParameter, string_param 3): a reserved region is kept. */
  #tensorParameter(entry: Buffer): void {
    const e = mapEntry(entry);
    if (e === undefined) {
      this.#reservedRegion ??= '';
      return;
    }
    const { key, value } = e;
    if (key !== 'shared_memory_region' || value === undefined) return;
    let region: string | undefined;
    const valueOk = walk(value, (number, wire, from, next) => {
      region = number === 3 && wire === LEN ? value.toString('utf8', from, next) : undefined; // the oneof's last member
    });
    if (!valueOk) this.#reservedRegion ??= '';
    else if (region !== undefined && this.fields.reservedRegion?.(region) === true) this.#reservedRegion ??= region;
  }

  /**
   * A repository parameters entry (key 1, value 2: ModelRepositoryParameter, whose oneof keeps the
   * last member set; bool_param is 1). Any entry saying `unload_dependents: true` counts, whatever
   * a later one says: the refusal this feeds errs towards refusing.
   */
  #repositoryParameter(entry: Buffer): void {
    const e = mapEntry(entry);
    if (e === undefined) {
      this.#unloadDependents = true;
      return;
    }
    const { key, value } = e;
    if (key !== 'unload_dependents' || value === undefined) return;
    let on = false;
    const valueOk = walk(value, (number, wire, from, next) => {
      if (wire === VARINT && number === 1) on = varint64(value, from, next) !== 0n;
      else on = false; // another member of the oneof set after it
    });
    if (!valueOk || on) this.#unloadDependents = true;
  }

  /** A parameters entry (key 1, value 2): a `sequence_id` replaces what came before (a map's last entry wins). */
  #parameter(entry: Buffer): void {
    const e = mapEntry(entry);
    if (e === undefined) {
      // Not parseable: protobuf would fail the whole message; Triton answers it with an error.
      this.#seqUnknown = true;
      return;
    }
    const { key, value } = e;
    if (key !== 'sequence_id') return;
    const v = value === undefined ? undefined : paramValue(value);
    this.#seq = v ?? undefined;
    this.#seqUnknown = v === null;
  }

  end(): MessageFacts {
    let problem = this.#problem;
    if (problem === undefined && (this.#stage !== Stage.Tag || this.#varint.length !== 0)) problem = 'the message ends inside a field';
    if (problem === undefined && this.#name !== undefined && !isUtf8(this.#name)) problem = 'the model name is not UTF-8';
    if (problem !== undefined) return { name: undefined, unreadable: problem };
    const name = this.#name === undefined ? '' : this.#name.toString('utf8');
    if (this.fields.key !== undefined && this.fields.key !== 0) {
      if (this.#keyValue !== undefined && !isUtf8(this.#keyValue)) return { name: undefined, unreadable: 'the key is not UTF-8' };
      return { name, key: this.#keyValue === undefined ? '' : this.#keyValue.toString('utf8') };
    }
    if (this.#reservedRegion !== undefined) return { name, reservedRegion: this.#reservedRegion };
    if (this.fields.repositoryParameters === true) return { name, parameterCount: this.#repositoryParameters, unloadDependents: this.#unloadDependents };
    if (!this.fields.sequence || this.#seqUnknown || this.#seq === undefined) return { name };
    return { name, sequenceKey: `${name}\u0000${this.#seq}` };
  }
}

/**
 * A map entry (key field 1, value field 2, both length-delimited: every map<string, message> of
 * these protos), the last copy of each winning; undefined when the entry does not parse.
 */
function mapEntry(entry: Buffer): { key: string; value: Buffer | undefined } | undefined {
  let key = '';
  let value: Buffer | undefined;
  const ok = walk(entry, (number, wire, from, next) => {
    if (wire !== LEN) return;
    if (number === 1) key = entry.toString('utf8', from, next);
    else if (number === 2) value = entry.subarray(from, next);
  });
  return ok ? { key, value } : undefined;
}

/**
 * Walks the fields of a whole message, calling `each` with each field's number, wire type and
 * value bytes (varint and fixed values too; tags and lengths of at most five bytes: 32-bit);
 * false when it is not well formed.
 */
function walk(b: Buffer, each: (number: number, wire: number, from: number, next: number) => void): boolean {
  const r = new WireReader([b]);
  while (!r.done()) {
    const tag = r.varint(5);
    if (tag < 0 || tag < 8) return false; // field number 0
    const wire = tag % 8;
    if (wire === LEN) {
      const length = r.varint(5);
      if (length < 0) return false;
      const from = r.offset;
      if (!r.skip(length)) return false;
      each(Math.floor(tag / 8), wire, from, r.offset);
      continue;
    }
    const from = r.offset;
    if (!r.skipValue(wire)) return false;
    each(Math.floor(tag / 8), wire, from, r.offset);
  }
  return true;
}

/**
 * An InferParameter's sequence id in the key's form (`n:`/`s:`): undefined for 0, "" or no value,
 * null when it cannot be read. Its oneof keeps the last member set.
 */
function paramValue(p: Buffer): string | undefined | null {
  let out: string | undefined;
  const ok = walk(p, (number, wire, from, next) => {
    if (wire === VARINT && (number === 2 || number === 5)) {
      const v = varint64(p, from, next);
      out = v === 0n ? undefined : `n:${number === 2 ? BigInt.asIntN(64, v) : v}`;
    } else if (wire === LEN && number === 3) {
      out = next === from ? undefined : `s:${p.toString('utf8', from, next)}`;
    } else if ((wire === VARINT && number === 1) || (wire === I64 && number === 4)) {
      out = undefined; // bool_param, double_param: not a sequence id Triton takes
    }
  });
  return ok ? out : null;
}
