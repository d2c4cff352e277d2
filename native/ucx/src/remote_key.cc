// RemoteKey (see remote_key.h).
#include "remote_key.h"

#include "endpoint.h"
#include "worker.h"

namespace robustrl::ucx {

Napi::Function RemoteKey::Init(Napi::Env env) {
  return DefineClass(env, "RemoteKey", {
    InstanceMethod<&RemoteKey::JsDestroy>("destroy"),
    InstanceAccessor<&RemoteKey::Valid>("valid"),
  });
}
Napi::Value RemoteKey::JsDestroy(const Napi::CallbackInfo& info) {
  if (retiredIn_) return info.Env().Undefined();  // already unusable; worker.close() destroys it
  if (ep_) ep_->RemoveRkey(this);
  Detach();
  return info.Env().Undefined();
}

void RemoteKey::Destroy() {
  if (!rkey_) return;
  if (retiredIn_) {
    if (retiredIn_->closed()) { rkey_ = nullptr; retiredIn_ = nullptr; return; }  // released with the worker
    retiredIn_->retiredRkeys_.erase(this);
    retiredIn_ = nullptr;
  }
  ucp_rkey_destroy(rkey_);
  rkey_ = nullptr;
}

void RemoteKey::Retire(Worker* w) {
  ep_ = nullptr;
  if (!rkey_ || retiredIn_) return;
  retiredIn_ = w;
  w->retiredRkeys_.insert(this);
  Ref();  // the worker destroys it; keep the wrapper until then
}

}  // namespace robustrl::ucx
