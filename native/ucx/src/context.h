// UCP contexts: the context behind each Worker (environment config + the caller's overrides), the
// memory types a context can register, and the module-level info() (UCX version, CUDA probe).
#pragma once

#include "common.h"

namespace robustrl::ucx {

// A Worker's ucp_context: ucp_config_read (the UCX_* environment), then options.config
// ({ KEY: "value" } → ucp_config_modify), then ucp_init(TAG|RMA|AM|WAKEUP). On failure a JS exception
// is pending and it returns nullptr.
ucp_context_h CreateContext(Napi::Env env, const Napi::Value& options);

// Memory types a context can register (ucp_context_query UCP_ATTR_FIELD_MEMORY_TYPES): a worker's own
// context for worker.cudaSupported / mapDevice, the probe context for info().
// UCX sets UCS_MEMORY_TYPE_CUDA only when a CUDA-capable md (cuda_copy) was loaded, i.e. a UCX built
// with CUDA and a usable driver.
uint64_t ContextMemoryTypes(ucp_context_h ctx);

// info(): { available: true, version, cudaSupported (ProbeCudaSupport), reason: null }.
Napi::Value ModuleInfo(const Napi::CallbackInfo& info);

}  // namespace robustrl::ucx
