// Worker (see worker.h): the progress engine — the uv handles' callbacks, Drive (progress until idle,
// within a time budget), Deliver (completions, endpoint failures, connection requests to JS) and
// CheckDeadlines (operation timeouts).
#include "worker.h"

#include "endpoint.h"
#include "errors.h"
#include "listener.h"

namespace robustrl::ucx {

constexpr uint64_t kBudgetNs = 2000000;  // max continuous progress per event-loop turn (2 ms)

void Worker::Kick() {
  if (closed_ || idleActive_) return;
  idleActive_ = true;
  uv_idle_start(idle_, &Worker::OnIdle);
}

void Worker::UpdateRef() {
  if (closed_) return;
  bool want = live() > 0 || !listeners_.empty();
  if (want == refd_) return;
  refd_ = want;
  if (want) uv_ref(reinterpret_cast<uv_handle_t*>(poll_));
  else uv_unref(reinterpret_cast<uv_handle_t*>(poll_));
}

void Worker::StartTimer() {
  if (closed_ || timerActive_) return;
  timerActive_ = true;
  uv_timer_start(timer_, &Worker::OnTimer, 10, 10);
}

void Worker::OnPoll(uv_poll_t* h, int status, int events) {
  auto* self = static_cast<Worker*>(h->data);
  self->wakeups_++;
  self->Drive(true);
}
void Worker::OnIdle(uv_idle_t* h) {
  auto* self = static_cast<Worker*>(h->data);
  uv_idle_stop(h);
  self->idleActive_ = false;
  self->Drive(true);
}
void Worker::OnTimer(uv_timer_t* h) {
  auto* self = static_cast<Worker*>(h->data);
  self->Drive(true);
  if (!self->closed_ && self->live() == 0) {
    uv_timer_stop(h);
    self->timerActive_ = false;
  }
}

void Worker::Drive(bool fromUv) {
  if (closed_ || driving_) return;
  driving_ = true;
  Napi::Env env = Env();
  Napi::HandleScope hs(env);
  {
    // CallbackScope: promise reactions / nextTicks run when it closes (like MakeCallback).
    Napi::CallbackScope cs(env, *async_);
    // Progress until idle, but yield to the event loop after ~kBudgetNs of continuous progress
    // (a large transfer keeps progress busy): then re-kick via uv_idle instead of arming.
    const uint64_t start = uv_hrtime();
    for (;;) {
      if (closed_) break;
      bool yielded = false;
      while (ucp_worker_progress(worker_)) {
        progressCalls_++;
        if ((progressCalls_ & 63) == 0 && uv_hrtime() - start > kBudgetNs) { yielded = true; break; }
      }
      progressCalls_++;
      bool delivered = Deliver();
      CheckDeadlines();
      if (closed_) break;
      if (yielded || uv_hrtime() - start > kBudgetNs) { Kick(); break; }
      if (delivered) continue;  // JS may have posted work; progress again
      ucs_status_t st = ucp_worker_arm(worker_);
      if (st == UCS_ERR_BUSY) continue;
      break;
    }
  }
  driving_ = false;
}

bool Worker::Deliver() {
  bool any = false;
  Napi::Env env = Env();
  // Endpoint failures first: mark, schedule force close, notify JS.
  while (!epErrors_.empty()) {
    any = true;
    std::vector<Endpoint*> errs;
    errs.swap(epErrors_);
    for (Endpoint* e : errs) e->HandleFailure();
  }
  while (!completions_.empty()) {
    any = true;
    std::vector<std::pair<Op*, ucs_status_t>> done;
    done.swap(completions_);
    for (auto& c : done) {
      Op* op = c.first;
      ucs_status_t st = c.second;
      op->queued = false;
      op->ucxDone = true;
      op->req = nullptr;
      if (op->kind == Op::PUT && op->stage == 0 && st == UCS_OK && !op->settled && op->ep &&
          op->ep->state() == Endpoint::OPEN) {
        // put completed locally: flush to get remote completion before resolving.
        op->stage = 1;
        ucp_request_param_t p;
        std::memset(&p, 0, sizeof(p));
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send = &Worker::SendCb;
        p.user_data = op;
        op->ucxDone = false;
        Posted(op, ucp_ep_flush_nbx(op->ep->ep(), &p));
        continue;
      }
      Settle(op, st);
      MaybeFree(op);
    }
  }
  while (!conns_.empty()) {
    any = true;
    ConnRequest cr = conns_.front();
    conns_.pop_front();
    if (!cr.listener->active()) { ucp_listener_reject(nullptr, cr.req); continue; }
    ucp_ep_params_t ep;
    std::memset(&ep, 0, sizeof(ep));
    ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
    ep.conn_request = cr.req;
    Endpoint* e = NewEndpoint(&ep);
    if (!e) continue;
    Napi::Function cb = cr.listener->cb().Value();
    try {
      cb.Call(cr.listener->Value(), {e->Value()});
    } catch (const Napi::Error& err) {
      napi_fatal_exception(env, err.Value());
    }
  }
  return any;
}

void Worker::CheckDeadlines() {
  if (pending_.empty()) return;
  uint64_t now = uv_now(loop_);
  std::vector<Op*> expired;
  for (Op* op : pending_)
    if (!op->settled && op->deadline && now >= op->deadline) expired.push_back(op);
  for (Op* op : expired) {
    if (op->settled) continue;
    op->settled = true;
    std::string what = op->kind == Op::GET ? "get" : op->kind == Op::PUT ? "put" : op->kind == Op::SEND ? "sendTag" :
                       op->kind == Op::RECV ? "recvTag" : op->kind == Op::CONNECT ? "connect" : "flush";
    op->deferred.Reject(MakeError(Env(), "timeout", UCS_OK, what + " timed out").Value());
    if (op->kind == Op::RECV) {
      if (op->req && !op->ucxDone) ucp_request_cancel(worker_, op->req);  // completes with CANCELED
    } else if (op->ep) {
      // RMA/send/connect timed out: the request may still touch memory, so force-close the endpoint,
      // which purges the request; the op (and its buffer refs) are freed when UCX completes it.
      op->ep->TimeoutHit();
    }
    MaybeFree(op);
  }
}

}  // namespace robustrl::ucx
