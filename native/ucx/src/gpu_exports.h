// The addon's GPU functions that need no UCX (CUDA driver and NVML, both loaded at run time): registered
// by module.cc and by stub.cc, so a machine whose UCX is missing still reports its GPUs.
#pragma once

#include <napi.h>

namespace robustrl {

void RegisterGpuExports(Napi::Env env, Napi::Object exports);

}  // namespace robustrl
