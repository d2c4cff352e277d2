// Real llama.cpp engines: one implementation for the tests and the benchmarks (bench is built, testing is not).
export * from '../../../bench/src/engines/llama-server';
