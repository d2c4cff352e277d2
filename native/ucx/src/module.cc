// @robustrl/ucx — node-addon-api binding over UCX UCP (built when pkg-config finds UCX; else stub.cc).
// This file only registers the exports; the classes live in worker / endpoint / mapping / remote_key /
// listener.{h,cc}, operation completion in operation.{h,cc}, errors in errors.{h,cc}, contexts and
// info() in context.{h,cc} (native/ucx/README.md, "Sources").
#include "context.h"
#include "endpoint.h"
#include "gpu_exports.h"
#include "listener.h"
#include "mapping.h"
#include "remote_key.h"
#include "worker.h"

namespace {

using namespace robustrl::ucx;

Napi::Object InitModule(Napi::Env env, Napi::Object exports) {
  auto* c = new Constructors();
  Napi::Function w = Worker::Init(env), e = Endpoint::Init(env), m = Mapping::Init(env),
                 k = RemoteKey::Init(env), l = Listener::Init(env);
  c->worker = Napi::Persistent(w);
  c->endpoint = Napi::Persistent(e);
  c->mapping = Napi::Persistent(m);
  c->rkey = Napi::Persistent(k);
  c->listener = Napi::Persistent(l);
  env.SetInstanceData<Constructors>(c);
  exports.Set("Worker", w);
  exports.Set("Endpoint", e);
  exports.Set("Mapping", m);
  exports.Set("RemoteKey", k);
  exports.Set("Listener", l);
  exports.Set("info", Napi::Function::New(env, ModuleInfo, "info"));
  robustrl::RegisterGpuExports(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(ucx, InitModule)
