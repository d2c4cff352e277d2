// Worker (see worker.h): context/worker lifetime — construction, info/stats, close and teardown. The
// rest of the class is split by concern: worker_progress.cc (the progress loop: Drive / Deliver /
// CheckDeadlines and the uv handles), worker_connect.cc (endpoints and listeners), worker_memory.cc
// (map* of memory regions) and worker_tags.cc (tagged receives).
#include "worker.h"

#include "context.h"
#include "endpoint.h"
#include "errors.h"
#include "listener.h"
#include "mapping.h"
#include "remote_key.h"

namespace robustrl::ucx {

Napi::Function Worker::Init(Napi::Env env) {
  return DefineClass(env, "Worker", {
    InstanceMethod<&Worker::Info>("info"),
    InstanceMethod<&Worker::Listen>("listen"),
    InstanceMethod<&Worker::Connect>("connect"),
    InstanceMethod<&Worker::ConnectAddress>("connectAddress"),
    InstanceMethod<&Worker::Address>("address"),
    InstanceMethod<&Worker::Map>("map"),
    InstanceMethod<&Worker::MapAlloc>("mapAlloc"),
    InstanceMethod<&Worker::MapFile>("mapFile"),
    InstanceMethod<&Worker::MapDevice>("mapDevice"),
    InstanceMethod<&Worker::MapIpc>("mapIpc"),
    InstanceMethod<&Worker::CudaSupportedJs>("cudaSupported"),
    InstanceMethod<&Worker::RecvTag>("recvTag"),
    InstanceMethod<&Worker::Close>("close"),
    InstanceMethod<&Worker::Stats>("stats"),
  });
}

Worker::Worker(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Worker>(info) {
  Napi::Env env = info.Env();
  ctx_ = CreateContext(env, info[0]);
  if (!ctx_) return;

  ucp_worker_params_t wp;
  std::memset(&wp, 0, sizeof(wp));
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucs_status_t st = ucp_worker_create(ctx_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(ctx_); ctx_ = nullptr;
    MakeError(env, "ucx", st, "ucp_worker_create failed").ThrowAsJavaScriptException(); return;
  }
  st = ucp_worker_get_efd(worker_, &efd_);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker_); ucp_cleanup(ctx_); worker_ = nullptr; ctx_ = nullptr;
    MakeError(env, "ucx", st, "ucp_worker_get_efd failed").ThrowAsJavaScriptException(); return;
  }
  napi_get_uv_event_loop(env, &loop_);
  poll_ = new uv_poll_t; idle_ = new uv_idle_t; timer_ = new uv_timer_t;
  uv_poll_init(loop_, poll_, efd_); poll_->data = this;
  uv_idle_init(loop_, idle_); idle_->data = this; uv_unref(reinterpret_cast<uv_handle_t*>(idle_));
  uv_timer_init(loop_, timer_); timer_->data = this; uv_unref(reinterpret_cast<uv_handle_t*>(timer_));
  uv_poll_start(poll_, UV_READABLE, &Worker::OnPoll);
  uv_unref(reinterpret_cast<uv_handle_t*>(poll_));
  async_ = new Napi::AsyncContext(env, "robustrl.ucx");
  // Drain anything pending and arm before the loop sleeps.
  while (ucp_worker_progress(worker_)) {}
  while (ucp_worker_arm(worker_) == UCS_ERR_BUSY) { while (ucp_worker_progress(worker_)) {} }
  Ref();  // pinned until close()
}

Worker::~Worker() {
  // Normally close() was called. At env teardown without close() we only drop the wakeup
  // handles' pointers; UCX resources die with the process (no JS may run here).
  delete async_;
}

Napi::Value Worker::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("efd", Napi::Number::New(env, efd_));
  o.Set("closed", Napi::Boolean::New(env, closed_));
  return o;
}

Napi::Value Worker::Stats(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("wakeups", Napi::Number::New(env, static_cast<double>(wakeups_)));
  o.Set("progressCalls", Napi::Number::New(env, static_cast<double>(progressCalls_)));
  o.Set("pendingOps", Napi::Number::New(env, static_cast<double>(pending_.size())));
  o.Set("orphanedOps", Napi::Number::New(env, static_cast<double>(orphans_)));
  o.Set("endpoints", Napi::Number::New(env, static_cast<double>(endpoints_.size())));
  o.Set("mappings", Napi::Number::New(env, static_cast<double>(mappings_.size())));
  o.Set("listeners", Napi::Number::New(env, static_cast<double>(listeners_.size())));
  return o;
}

void Worker::Destroy() {
  // Force-close every endpoint (purges their requests), cancel receives, progress until UCX
  // has completed everything, then release memory handles, the worker and the context.
  std::vector<Listener*> ls(listeners_.begin(), listeners_.end());
  for (Listener* l : ls) l->Shutdown();
  std::vector<Endpoint*> eps(endpoints_.begin(), endpoints_.end());
  for (Endpoint* e : eps) e->ForceClose(Env());
  for (Op* op : pending_) if (op->kind == Op::RECV && op->req && !op->ucxDone) ucp_request_cancel(worker_, op->req);
  for (int i = 0; i < 100000; i++) {
    while (ucp_worker_progress(worker_)) {}
    // Orphans (requests of abandoned errorHandling 'none' eps, and their background close) may never
    // complete: do not wait for them, ucp_worker_destroy releases their requests.
    bool busy = false;
    for (Op* op : pending_)
      if (!op->ucxDone && !op->orphaned) { busy = true; break; }
    if (!busy) break;
  }
  // Drain queued connection requests.
  for (auto& cr : conns_) ucp_listener_reject(nullptr, cr.req);
  conns_.clear();
  for (Endpoint* e : std::vector<Endpoint*>(endpoints_.begin(), endpoints_.end())) {
    for (RemoteKey* k : e->rkeys_) k->Detach();
    e->rkeys_.clear();
    e->ep_ = nullptr;
    e->state_ = Endpoint::CLOSED;
  }
  std::vector<Mapping*> ms(mappings_.begin(), mappings_.end());
  uv_poll_stop(poll_);
  uv_idle_stop(idle_);
  uv_timer_stop(timer_);
  uv_close(reinterpret_cast<uv_handle_t*>(poll_), [](uv_handle_t* h) { delete reinterpret_cast<uv_poll_t*>(h); });
  uv_close(reinterpret_cast<uv_handle_t*>(idle_), [](uv_handle_t* h) { delete reinterpret_cast<uv_idle_t*>(h); });
  uv_close(reinterpret_cast<uv_handle_t*>(timer_), [](uv_handle_t* h) { delete reinterpret_cast<uv_timer_t*>(h); });
  poll_ = nullptr; idle_ = nullptr; timer_ = nullptr;
  for (Mapping* m : ms) m->DoUnmap();   // ucp_mem_unmap + drop the JS buffer reference
  for (RemoteKey* k : retiredRkeys_) { k->DestroyRetired(); k->Unref(); }  // before the worker's rkey mpool goes
  retiredRkeys_.clear();
  ucp_worker_destroy(worker_);
  worker_ = nullptr;
  ucp_cleanup(ctx_);
  ctx_ = nullptr;
}

Napi::Value Worker::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (closed_) return env.Undefined();
  closed_ = true;
  // Pending ops are rejected after Destroy() has made UCX complete them.
  std::vector<std::pair<Op*, ucs_status_t>> leftover;
  Destroy();
  completions_.swap(leftover);
  for (auto& c : leftover) { c.first->ucxDone = true; Settle(c.first, c.second); }
  std::vector<Op*> all(pending_.begin(), pending_.end());
  for (Op* op : all) {
    op->ucxDone = true;
    Settle(op, UCS_ERR_CANCELED);
    if (op->mapping) op->mapping->OpDone();
    pending_.erase(op);
    delete op;
  }
  orphans_ = 0;
  for (Endpoint* e : std::vector<Endpoint*>(endpoints_.begin(), endpoints_.end())) e->Closed();
  Unref();
  return env.Undefined();
}

}  // namespace robustrl::ucx
