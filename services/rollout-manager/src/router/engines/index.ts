export * from './engine-adapter';
export * from './adapters';
export * from './token-ledger';
export * from './completion-as-chat';
export { LlamaCppAdapter } from './llama-cpp-adapter';
export { SglangAdapter } from './sglang-adapter';
export { VllmAdapter } from './vllm-adapter';
