import { EngineAdapter, EngineKind } from './engine-adapter';
import { LlamaCppAdapter } from './llama-cpp-adapter';
import { SglangAdapter } from './sglang-adapter';
import { VllmAdapter } from './vllm-adapter';

const ADAPTERS: Record<EngineKind, EngineAdapter> = {
  vllm: new VllmAdapter(),
  sglang: new SglangAdapter(),
  'llama.cpp': new LlamaCppAdapter(),
};

/** The adapter of an engine kind (they hold no state: one each serves every engine of its kind). */
export function adapterFor(kind: EngineKind): EngineAdapter {
  return ADAPTERS[kind];
}

export function isEngineKind(value: unknown): value is EngineKind {
  return typeof value === 'string' && Object.hasOwn(ADAPTERS, value);
}
