// RemoteKey: a peer's packed rkey unpacked on one endpoint (ucp_ep_rkey_unpack), used by its get/put.
#pragma once

#include "common.h"

namespace robustrl::ucx {

class RemoteKey : public Napi::ObjectWrap<RemoteKey> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit RemoteKey(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RemoteKey>(info) {}
  ~RemoteKey() override { Destroy(); }
  void Setup(Endpoint* ep, ucp_rkey_h k) { ep_ = ep; rkey_ = k; }
  void Destroy();
  void Detach() { Destroy(); ep_ = nullptr; }
  // The endpoint was abandoned (errorHandling 'none', see Endpoint::Abandon) while requests that may
  // still use this rkey are outstanding: unusable from now on, destroyed by worker.close() before the
  // worker (whose mpool holds the rkey) goes away.
  void Retire(Worker* w);
  void DestroyRetired() { if (rkey_) ucp_rkey_destroy(rkey_); rkey_ = nullptr; retiredIn_ = nullptr; }
  ucp_rkey_h rkey() const { return rkey_; }
  Endpoint* ep() const { return ep_; }
 private:
  Napi::Value JsDestroy(const Napi::CallbackInfo& info);
  Napi::Value Valid(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), rkey_ != nullptr && !retiredIn_); }
  Endpoint* ep_ = nullptr;
  ucp_rkey_h rkey_ = nullptr;
  Worker* retiredIn_ = nullptr;  // set while retired: the worker that will destroy it
};

}  // namespace robustrl::ucx
