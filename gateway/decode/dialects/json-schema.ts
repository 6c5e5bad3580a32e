// JSON Schema for the OpenAI API (docs/openai.md "Structured output", "Tools"): a request's schema
// (a tool's `parameters`, `response_format.json_schema.schema`) checked against the JSON Schema
// meta-schema when it arrives, and an answer checked against its schema before it goes out, with
// Ajv (draft-07, the meta-schema Ajv's default instance holds; OpenAI's own subset is within it).
// `format` keywords are not checked (Ajv leaves them to ajv-formats). Compiled validators are kept
// by the schema's text in a small bounded cache; Ajv's own cache is emptied after each compile, so
// schemas that each request brings anew do not pile up there.
import Ajv, { type ValidateFunction } from 'ajv';

const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: false });

/** Why a value is not a JSON Schema, or undefined when it is one. */
export function schemaProblem(schema: unknown): string | undefined {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return 'must be a JSON Schema object';
  try {
    if (ajv.validateSchema(undeclared(schema)) !== true) return `is not a valid JSON Schema: ${ajv.errorsText(ajv.errors, { dataVar: 'schema' })}`;
    validator(schema);
  } catch (err) {
    return `is not a JSON Schema the gateway can check: ${(err as Error).message}`;
  }
  return undefined;
}

/**
 * The schema without its `$schema`: whichever draft it names (Pydantic's are 2020-12, zod's
 * draft-07), it is read as draft-07, of which OpenAI's subset is part.
 */
function undeclared(schema: object): object {
  if (!('$schema' in schema)) return schema;
  const rest: Record<string, unknown> = { ...schema };
  delete rest.$schema;
  return rest;
}

const CACHED = 256;
const compiled = new Map<string, ValidateFunction>();

function validator(schema: object): ValidateFunction {
  const key = JSON.stringify(schema);
  let v = compiled.get(key);
  if (v === undefined) {
    const bare = undeclared(schema);
    try {
      v = ajv.compile(bare);
    } finally {
      ajv.removeSchema(bare);
    }
    if (compiled.size >= CACHED) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, v);
  }
  return v;
}

/** Why `value` does not satisfy `schema` (a schema schemaProblem accepted), or undefined. */
export function violation(schema: object, value: unknown): string | undefined {
  const v = validator(schema);
  return v(value) ? undefined : ajv.errorsText(v.errors, { dataVar: 'answer' });
}
