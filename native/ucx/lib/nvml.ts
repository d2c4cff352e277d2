/** NVML (C++: nvml.cc), loaded by the addon at run time and present in the stub build too. */
import { load, loadedAddon } from './native';
import type { NvmlSample } from './types';

/** Per-GPU activity from NVML (utilisation, and tensor-core activity where GPM exists); never throws. */
export function nvmlSample(): NvmlSample {
  load();
  const native = loadedAddon();
  if (!native?.nvmlSample) return { available: false, reason: 'this build of the UCX addon has no NVML functions', devices: [] };
  return native.nvmlSample();
}
