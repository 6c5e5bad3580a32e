// The `openai` section the OpenAI-compatible API's conformance tests serve the zoo with
// (test/triton/zoo.py: tiny_llm in the vLLM backend's convention, tiny_llm_trtllm in TensorRT-LLM's,
// tiny_embed), as a YAML config file's text; paths are absolute so the file can live anywhere.
import { join } from 'node:path';

export function openaiConfig(root: string): string {
  const template = join(root, 'config/tiny_llm/tokenizer_config.json');
  return [
    'openai:',
    '  models:',
    `    - { id: tiny_llm, kind: generate, convention: vllm, chatTemplate: ${JSON.stringify(template)}, imageInput: image, toolParser: hermes }`,
    `    - { id: tiny_llm_trtllm, kind: generate, convention: trtllm, chatTemplate: ${JSON.stringify(template)}, toolParser: hermes }`,
    '    - { id: tiny_embed, kind: embedding }',
    '',
  ].join('\n');
}
