// Endpoint: one ucp_ep (sockaddr, accepted, or worker address): RMA, tagged sends, flush, close, and
// peer-failure handling (UCP_ERR_HANDLING_MODE_PEER, or the abandon path of errorHandling 'none').
#pragma once

#include <unordered_set>
#include <vector>

#include "common.h"
#include "operation.h"
#include "worker.h"

namespace robustrl::ucx {

class Endpoint : public Napi::ObjectWrap<Endpoint> {
 public:
  enum State { OPEN, FAILED, CLOSING, CLOSED };
  static Napi::Function Init(Napi::Env env);
  explicit Endpoint(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Endpoint>(info) {}
  ~Endpoint() override {}

  void Setup(Worker* w, ucp_ep_h ep) {
    worker_ = w; ep_ = ep; state_ = OPEN;
    workerRef_ = Napi::Persistent(w->Value());
    Ref();  // JS object pinned while the UCX endpoint exists
    w->AddEndpoint(this);
  }
  static void ErrCb(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* self = static_cast<Endpoint*>(arg);
    if (self->failStatus_ == UCS_OK) self->failStatus_ = status;
    if (self->state_ == OPEN) self->state_ = FAILED;
    self->worker_->QueueEpError(self);
  }
  void HandleFailure();            // JS context: close ep (force), notify JS
  void ForceClose(Napi::Env env);  // JS context: used by failure and Worker::close
  void RejectUnpurged(Napi::Env env, const char* why);  // errorHandling 'none': settle what UCX will not purge
  void Abandon(Napi::Env env, const char* why);         // errorHandling 'none': the "force close"
  void Closed();                   // close completed / ep gone
  void AddRkey(RemoteKey* k) { rkeys_.insert(k); }
  void RemoveRkey(RemoteKey* k) { rkeys_.erase(k); }
  State state() const { return state_; }
  ucs_status_t failStatus() const { return failStatus_; }
  bool userClosed() const { return userClosed_; }
  ucp_ep_h ep() const { return ep_; }
  void TimeoutHit() {  // an RMA/send timed out: the link is suspect -> force close
    if (state_ == OPEN || state_ == FAILED) { timedOut_ = true; ForceClose(Env()); }
  }
  bool timedOut() const { return timedOut_; }

 private:
  Napi::Value Get(const Napi::CallbackInfo& info) { return Rma(info, Op::GET); }
  Napi::Value Put(const Napi::CallbackInfo& info) { return Rma(info, Op::PUT); }
  Napi::Value Rma(const Napi::CallbackInfo& info, Op::Kind kind);
  Napi::Value SendTag(const Napi::CallbackInfo& info);
  Napi::Value Flush(const Napi::CallbackInfo& info);
  Napi::Value UnpackRkey(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value StateJs(const Napi::CallbackInfo& info);
  Napi::Value PrintInfo(const Napi::CallbackInfo& info);
  Napi::Value FailPeer(const Napi::CallbackInfo& info);
  Napi::Value OnError(const Napi::CallbackInfo& info) {
    if (info[0].IsFunction()) onError_ = Napi::Persistent(info[0].As<Napi::Function>());
    else onError_.Reset();
    return info.Env().Undefined();
  }
  Napi::Value NotOpen(Napi::Env env);

  Worker* worker_ = nullptr;
  Napi::ObjectReference workerRef_;
  ucp_ep_h ep_ = nullptr;
  State state_ = CLOSED;
  ucs_status_t failStatus_ = UCS_OK;
  bool userClosed_ = false, timedOut_ = false, notified_ = false;
  bool peerErrors_ = true;  // UCP_ERR_HANDLING_MODE_PEER (false: MODE_NONE, see connectAddress)
  std::unordered_set<RemoteKey*> rkeys_;
  Napi::FunctionReference onError_;
  std::vector<Op*> closeWaiters_;
  friend class Worker;
};

}  // namespace robustrl::ucx
