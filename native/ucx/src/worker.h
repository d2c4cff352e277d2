// Worker: one ucp_context + one ucp_worker, and the progress engine every other object relies on.
//
// Threading/progress model: one ucp_context + one ucp_worker (UCS_THREAD_MODE_SINGLE) per
// Worker object, all on the Node main thread. The worker's wakeup fd (ucp_worker_get_efd) is
// watched by a uv_poll_t; on every wake we progress until idle, deliver completions to JS
// and re-arm (ucp_worker_arm; UCS_ERR_BUSY -> progress again). UCX callbacks never touch JS:
// they only queue completions, which are delivered after progress returns, inside a
// CallbackScope so that promise reactions run. A uv_idle "kick" runs one progress pass right
// after an operation is posted, and a 10 ms uv_timer runs only while operations are in flight
// (deadline checks + safety net against a missed wakeup). Nothing runs when idle.
#pragma once

#include <deque>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common.h"
#include "operation.h"

namespace robustrl::ucx {

class Worker : public Napi::ObjectWrap<Worker> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Worker(const Napi::CallbackInfo& info);
  ~Worker() override;

  ucp_context_h ctx() const { return ctx_; }
  ucp_worker_h worker() const { return worker_; }
  bool closed() const { return closed_; }
  Constructors* ctors() { return Env().GetInstanceData<Constructors>(); }

  // Called from UCX callbacks (no JS allowed).
  void QueueCompletion(Op* op, ucs_status_t st) { op->queued = true; completions_.push_back({op, st}); Kick(); }
  void QueueConn(Listener* l, ucp_conn_request_h r) { conns_.push_back({l, r}); Kick(); }
  void QueueEpError(Endpoint* ep) { epErrors_.push_back(ep); Kick(); }

  // Bookkeeping used by operations.
  void Track(Op* op) { pending_.insert(op); UpdateRef(); StartTimer(); Kick(); }
  void Untrack(Op* op) {
    if (pending_.erase(op) && op->orphaned) orphans_--;
    UpdateRef();
  }
  void Orphan(Op* op) {
    if (op->orphaned || !pending_.count(op)) return;
    op->orphaned = true;
    orphans_++;
    UpdateRef();
  }
  // Ops that still need progress: pending ones except orphans (those only wait for worker.close()).
  size_t live() const { return pending_.size() - orphans_; }
  void AddListener(Listener* l) { listeners_.insert(l); UpdateRef(); }
  void RemoveListener(Listener* l) { listeners_.erase(l); UpdateRef(); }
  void AddEndpoint(Endpoint* e) { endpoints_.insert(e); }
  void RemoveEndpoint(Endpoint* e) { endpoints_.erase(e); }
  void AddMapping(Mapping* m) { mappings_.insert(m); }
  void RemoveMapping(Mapping* m) { mappings_.erase(m); }
  void Kick();

  // Post helpers: take a ucs_status_ptr_t returned by an nbx call (defined in operation.cc).
  void Posted(Op* op, ucs_status_ptr_t p);
  void Settle(Op* op, ucs_status_t st);       // settle JS promise (JS context required)
  void MaybeFree(Op* op);                     // delete op if settled and UCX is done
  Endpoint* NewEndpoint(ucp_ep_params_t* params, bool peerErrors = true);

  static void SendCb(void* request, ucs_status_t status, void* user);
  static void RecvCb(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user);

 private:
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Listen(const Napi::CallbackInfo& info);
  Napi::Value Connect(const Napi::CallbackInfo& info);
  Napi::Value ConnectAddress(const Napi::CallbackInfo& info);
  Napi::Value Address(const Napi::CallbackInfo& info);
  Napi::Value StartConnect(Endpoint* e, double timeoutMs);
  Napi::Value Map(const Napi::CallbackInfo& info);
  Napi::Value MapAlloc(const Napi::CallbackInfo& info);
  Napi::Value MapFile(const Napi::CallbackInfo& info);
  Napi::Value MapDevice(const Napi::CallbackInfo& info);
  Napi::Value MapIpc(const Napi::CallbackInfo& info);
  Napi::Value CudaSupportedJs(const Napi::CallbackInfo& info);
  Napi::Value RecvTag(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);

  void Drive(bool fromUv);
  bool Deliver();
  void CheckDeadlines();
  void UpdateRef();
  void StartTimer();
  void Destroy();

  static void OnPoll(uv_poll_t* h, int status, int events);
  static void OnIdle(uv_idle_t* h);
  static void OnTimer(uv_timer_t* h);

  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  uv_loop_t* loop_ = nullptr;
  uv_poll_t* poll_ = nullptr;
  uv_idle_t* idle_ = nullptr;
  uv_timer_t* timer_ = nullptr;
  bool idleActive_ = false, timerActive_ = false, refd_ = false;
  bool closed_ = false, driving_ = false;
  Napi::AsyncContext* async_ = nullptr;
  std::vector<std::pair<Op*, ucs_status_t>> completions_;
  std::deque<ConnRequest> conns_;
  std::vector<Endpoint*> epErrors_;
  std::unordered_set<Op*> pending_;
  size_t orphans_ = 0;               // ops in pending_ with orphaned set
  std::unordered_set<RemoteKey*> retiredRkeys_;  // see RemoteKey::Retire
  friend class RemoteKey;
  std::unordered_set<Listener*> listeners_;
  std::unordered_set<Endpoint*> endpoints_;
  std::unordered_set<Mapping*> mappings_;
  uint64_t wakeups_ = 0, progressCalls_ = 0;
  friend class Endpoint;
};

}  // namespace robustrl::ucx
