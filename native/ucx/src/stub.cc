// Stub addon: built when pkg-config finds no UCX (or ROBUSTRL_UCX_STUB=1), and always built as
// the `ucx_stub` target so that the "unavailable" path can be tested on machines that have UCX.
#include <napi.h>

#include "gpu_exports.h"

#ifndef UCX_STUB_REASON
#define UCX_STUB_REASON "built without UCX"
#endif

static Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", Napi::Boolean::New(env, false));
  o.Set("version", env.Null());
  o.Set("cudaSupported", Napi::Boolean::New(env, false));
  o.Set("reason", Napi::String::New(env,
      UCX_STUB_REASON ": the native module was compiled as a stub because pkg-config could not find "
      "'ucx' or the build against it failed (`bash deploy/local/ucx.sh ensure` installs Debian's "
      "libucx-dev and rebuilds; on GPU machines build against the libucx-cu13/cu12 wheel: "
      "ROBUSTRL_UCX_PREFIX=<its libucx dir> npm run build:native -w @robustrl/ucx, native/ucx/README.md \"GPU\")"));
  return o;
}

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("info", Napi::Function::New(env, Info, "info"));
  robustrl::RegisterGpuExports(env, exports);
  return exports;
}

NODE_API_MODULE(ucx_stub, Init)
