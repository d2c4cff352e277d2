// Endpoint (see endpoint.h).
#include "endpoint.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "errors.h"
#include "mapping.h"
#include "remote_key.h"

namespace robustrl::ucx {

Napi::Function Endpoint::Init(Napi::Env env) {
  return DefineClass(env, "Endpoint", {
    InstanceMethod<&Endpoint::Get>("get"),
    InstanceMethod<&Endpoint::Put>("put"),
    InstanceMethod<&Endpoint::SendTag>("sendTag"),
    InstanceMethod<&Endpoint::Flush>("flush"),
    InstanceMethod<&Endpoint::UnpackRkey>("unpackRkey"),
    InstanceMethod<&Endpoint::Close>("close"),
    InstanceMethod<&Endpoint::OnError>("onError"),
    InstanceMethod<&Endpoint::PrintInfo>("printInfo"),
    InstanceMethod<&Endpoint::FailPeer>("failPeer"),
    InstanceAccessor<&Endpoint::StateJs>("state"),
  });
}

Napi::Value Endpoint::StateJs(const Napi::CallbackInfo& info) {
  static const char* names[] = {"open", "failed", "closing", "closed"};
  return Napi::String::New(info.Env(), names[state_]);
}

// ucp_ep_print_info captured into a string: the endpoint's configuration and its lanes
// (am / rma / rma_bw / amo lanes with transport and device), for diagnostics.
Napi::Value Endpoint::PrintInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!ep_ || state_ == CLOSED) throw MakeError(env, "closed", failStatus_, "endpoint is closed");
  char* buf = nullptr;
  size_t sz = 0;
  FILE* f = open_memstream(&buf, &sz);
  if (!f) throw MakeError(env, "ucx", UCS_ERR_NO_MEMORY, "open_memstream failed");
  ucp_ep_print_info(ep_, f);
  fclose(f);
  std::string out(buf ? buf : "", sz);
  free(buf);
  return Napi::String::New(env, out);
}

Napi::Value Endpoint::NotOpen(Napi::Env env) {
  if (state_ == FAILED || failStatus_ != UCS_OK)
    return RejectedPromise(env, MakeError(env, "closed", failStatus_, "endpoint failed (peer failure)"));
  return RejectedPromise(env, MakeError(env, "closed", UCS_OK, "endpoint is closed"));
}

void Endpoint::HandleFailure() {
  // Runs outside UCX callbacks. UCX has already completed/purges the ep's requests with errors.
  if (!notified_) {
    notified_ = true;
    if (!onError_.IsEmpty()) {
      Napi::Env env = Env();
      try {
        onError_.Call(Value(), {MakeError(env, "peer", failStatus_, "peer failure").Value()});
      } catch (const Napi::Error& err) {
        napi_fatal_exception(env, err.Value());
      }
    }
  }
  ForceClose(Env());
}

// ERR_HANDLING_MODE_NONE: UCX tracks (and on failure purges) requests per endpoint only when error
// handling is on, and it refuses to force-close such an ep (see Abandon). A GET from memory the peer
// registered from user memory (map/mapFile) is served by the *peer's* worker over the shm AM lane
// (UCX 1.13 has no one-sided rma lane for it), so with a dead peer such a request never completes.
// Reject the promises here; the ops keep their JS buffers, mappings and endpoint referenced until UCX
// completes them, which may be never (then until worker.close(); see Endpoint::Closed).
void Endpoint::RejectUnpurged(Napi::Env env, const char* why) {
  if (peerErrors_) return;  // UCX purges (completes with an error status) on force close
  const bool peer = failStatus_ != UCS_OK;
  for (Op* p : worker_->pending_) {
    if (p->ep != this || p->settled || p->kind == Op::CLOSE) continue;
    p->settled = true;
    p->deferred.Reject(MakeError(env, peer ? "peer" : "closed", peer ? failStatus_ : UCS_ERR_CANCELED,
                                 peer ? std::string("peer failure: ") + why : std::string(why)).Value());
  }
}

// The force close of an errorHandling 'none' ep. UCX 1.13 refuses UCP_EP_CLOSE_FLAG_FORCE on such an
// ep (ucp_ep_close_nbx returns UCS_ERR_INVALID_PARAM), and a flushing close waits for the requests,
// forever if the peer is dead. So: reject the pending promises, close the JS side now (state 'closed',
// close() waiters resolved, stuck ops orphaned), and start a flushing ucp_ep_close_nbx in the
// background. That one completes if the peer is alive (its requests complete normally); if the peer
// is dead it completes at worker.close(), where ucp_worker_destroy releases the ep and its requests.
// The ep's rkeys are retired, not destroyed: a request still queued in UCX may use them.
void Endpoint::Abandon(Napi::Env env, const char* why) {
  state_ = CLOSING;
  RejectUnpurged(env, why);
  for (RemoteKey* k : rkeys_) k->Retire(worker_);
  rkeys_.clear();
  ucp_ep_h ep = ep_;
  Worker* w = worker_;
  Closed();  // JS side done; orphans this ep's stuck ops
  Op* op = new Op(Op::CLOSE, w, env);
  op->settled = true;  // nobody waits on it; op->ep stays null so its completion does not touch this object
  w->Track(op);
  w->Orphan(op);  // may never complete: must not keep the loop alive or hold up worker.close()
  ucp_request_param_t rp = SendParams(op, UCP_OP_ATTR_FIELD_FLAGS);
  rp.flags = 0;
  w->Posted(op, ucp_ep_close_nbx(ep, &rp));
}

void Endpoint::ForceClose(Napi::Env env) {
  if (!ep_ || state_ == CLOSING || state_ == CLOSED) return;
  if (!peerErrors_) {
    Abandon(env, failStatus_ != UCS_OK ? "endpoint force-closed after its peer failed (errorHandling 'none')"
                                       : "endpoint force-closed (errorHandling 'none')");
    return;
  }
  for (RemoteKey* k : rkeys_) k->Detach();
  rkeys_.clear();
  state_ = CLOSING;
  Op* op = new Op(Op::CLOSE, worker_, env);
  op->ep = this;
  op->settled = true;  // nobody waits on a forced close (user close() waits via its own op)
  op->deadline = 0;
  worker_->Track(op);
  ucp_request_param_t rp = SendParams(op, UCP_OP_ATTR_FIELD_FLAGS);
  rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
  worker_->Posted(op, ucp_ep_close_nbx(ep_, &rp));
}

void Endpoint::Closed() {
  if (state_ == CLOSED && !ep_) { /* fallthrough to release */ }
  // Requests UCX has not completed when the JS side closes (only possible for an abandoned
  // errorHandling 'none' ep, see Abandon/RejectUnpurged) are already settled; they no longer need
  // progress, so they stop keeping the event loop alive and the 10 ms timer running. Their references
  // are dropped when UCX completes them or at worker.close() (ucp_worker_destroy releases them).
  if (worker_) {
    for (Op* p : worker_->pending_)
      if (p->ep == this && p->kind != Op::CLOSE && !p->ucxDone) worker_->Orphan(p);
    // A queued failure must not reach this object once it is unpinned below.
    auto& q = worker_->epErrors_;
    q.erase(std::remove(q.begin(), q.end(), this), q.end());
  }
  for (RemoteKey* k : rkeys_) k->Detach();
  rkeys_.clear();
  ep_ = nullptr;
  state_ = CLOSED;
  for (Op* w : closeWaiters_) {
    if (!w->settled) { w->settled = true; w->deferred.Resolve(Env().Undefined()); }
    delete w;
  }
  closeWaiters_.clear();
  if (worker_) worker_->RemoveEndpoint(this);
  onError_.Reset();
  if (!workerRef_.IsEmpty()) {
    workerRef_.Reset();
    Unref();
  }
}

Napi::Value Endpoint::Close(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool force = info.Length() > 0 && info[0].ToBoolean();
  if (state_ == CLOSED || !ep_) {  // closing twice is not an error
    auto d = Napi::Promise::Deferred::New(env);
    d.Resolve(env.Undefined());
    return d.Promise();
  }
  userClosed_ = true;
  if (force && !peerErrors_ && state_ != CLOSING) {
    Abandon(env, "endpoint closed (force) while the operation was pending");
    auto d = Napi::Promise::Deferred::New(env);
    d.Resolve(env.Undefined());
    return d.Promise();
  }
  if (state_ == CLOSING) {  // already closing (e.g. after failure): wait for it
    Op* w = new Op(Op::FLUSH, worker_, env);
    w->settled = false;
    closeWaiters_.push_back(w);
    Napi::Value p = w->deferred.Promise();
    // waiter ops are not tracked by UCX; settle in Closed(); leaked Op object is freed there
    return p;
  }
  for (RemoteKey* k : rkeys_) k->Detach();
  rkeys_.clear();
  state_ = CLOSING;
  Op* op = new Op(Op::CLOSE, worker_, env);
  op->ep = this;
  Napi::Value promise = op->deferred.Promise();
  worker_->Track(op);
  ucp_request_param_t rp = SendParams(op, UCP_OP_ATTR_FIELD_FLAGS);
  rp.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  worker_->Posted(op, ucp_ep_close_nbx(ep_, &rp));
  return promise;
}

// failPeer(status): another endpoint to the same peer (connectRma's control endpoint) reported a peer
// failure. Treat it as this endpoint's own: state 'failed', onError fires with that status, the ep
// is force-closed, and pending operations reject as peer failures (PeerUnreachableError). This is how
// an errorHandling 'none' endpoint, for which UCX reports nothing, learns that its peer is gone.
Napi::Value Endpoint::FailPeer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ucs_status_t st = info.Length() > 0 && info[0].IsNumber() ? static_cast<ucs_status_t>(info[0].As<Napi::Number>().Int32Value())
                                                           : UCS_ERR_CONNECTION_RESET;
  if (st == UCS_OK || st == UCS_INPROGRESS) st = UCS_ERR_CONNECTION_RESET;
  if (!ep_ || state_ == CLOSING || state_ == CLOSED) return env.Undefined();
  if (failStatus_ == UCS_OK) failStatus_ = st;
  state_ = FAILED;
  worker_->QueueEpError(this);  // handled by Deliver (HandleFailure), like a UCX error callback
  return env.Undefined();
}

Napi::Value Endpoint::UnpackRkey(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (state_ != OPEN) throw MakeError(env, "closed", failStatus_, "endpoint is not open");
  uint8_t* p; size_t l; bool det;
  if (!BufferSpan(info[0], &p, &l, &det)) throw Napi::TypeError::New(env, "unpackRkey: expected a Buffer");
  ucp_rkey_h k = nullptr;
  ucs_status_t st = ucp_ep_rkey_unpack(ep_, p, &k);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_ep_rkey_unpack failed");
  Napi::Object obj = worker_->ctors()->rkey.New({});
  RemoteKey* rk = RemoteKey::Unwrap(obj);
  rk->Setup(this, k);
  rkeys_.insert(rk);
  return obj;
}

// get(mapping, localOffset, length, remoteAddress, rkey, timeoutMs)
// put(mapping, localOffset, length, remoteAddress, rkey, timeoutMs)
Napi::Value Endpoint::Rma(const Napi::CallbackInfo& info, Op::Kind kind) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject() || !info[0].As<Napi::Object>().InstanceOf(worker_ ? worker_->ctors()->mapping.Value() : env.GetInstanceData<Constructors>()->mapping.Value()))
    throw Napi::TypeError::New(env, "expected a Mapping as the local buffer");
  Mapping* m = Mapping::Unwrap(info[0].As<Napi::Object>());
  uint64_t off = ToU64(info[1], "localOffset");
  uint64_t len = ToU64(info[2], "length");
  uint64_t raddr = ToU64(info[3], "remoteAddress");
  if (!info[4].IsObject()) throw Napi::TypeError::New(env, "expected a RemoteKey");
  RemoteKey* rk = RemoteKey::Unwrap(info[4].As<Napi::Object>());
  double timeoutMs = info.Length() > 5 && info[5].IsNumber() ? info[5].As<Napi::Number>().DoubleValue() : 0;
  bool describe = info.Length() > 6 && info[6].ToBoolean();
  if (state_ != OPEN || !ep_) return NotOpen(env);
  if (!m->Usable()) return RejectedPromise(env, MakeError(env, "ucx", UCS_ERR_INVALID_PARAM, "local mapping is unmapped"));
  if (!m->CheckAlive()) return RejectedPromise(env, MakeError(env, "ucx", UCS_ERR_INVALID_PARAM, "local buffer was detached"));
  if (off > m->len() || len > m->len() - off)
    return RejectedPromise(env, MakeError(env, "ucx", UCS_ERR_OUT_OF_RANGE, "local range outside the mapping"));
  if (!rk->rkey() || rk->ep() != this) return RejectedPromise(env, MakeError(env, "closed", UCS_OK, "remote key is destroyed or belongs to another endpoint"));
  Op* op = new Op(kind, worker_, env);
  op->ep = this;
  op->mapping = m;
  m->OpStarted();
  op->keep1 = Napi::Persistent(info[0].As<Napi::Object>());
  op->keep2 = Napi::Persistent(info[4].As<Napi::Object>());
  op->keep3 = Napi::Persistent(Value());
  if (timeoutMs > 0) op->deadline = uv_now(worker_->loop_) + static_cast<uint64_t>(timeoutMs);
  Napi::Value promise = op->deferred.Promise();
  worker_->Track(op);
  // describe: the operation must return a request (UCP_OP_ATTR_FLAG_NO_IMM_CMPL) so that it can be asked
  // which protocol UCX selected for this (local, remote) memory pair and size, e.g. "zero-copy" over
  // cuda_ipc, or a software emulation that is 1000x slower (gpu-offline-build.md, section 3).
  ucp_request_param_t rp = SendParams(op, UCP_OP_ATTR_FIELD_MEMH | (describe ? UCP_OP_ATTR_FLAG_NO_IMM_CMPL : 0));
  rp.memh = m->memh();
  void* local = m->ptr() + off;
  ucs_status_ptr_t r = kind == Op::GET ? ucp_get_nbx(ep_, local, len, raddr, rk->rkey(), &rp)
                                       : ucp_put_nbx(ep_, local, len, raddr, rk->rkey(), &rp);
  if (describe) {
    op->describe = true;
    op->protocol = "unknown (the operation completed before it could be asked)";
    if (r != nullptr && !UCS_PTR_IS_ERR(r) && !op->ucxDone) {
      char text[512] = {0};
      ucp_request_attr_t attr;
      std::memset(&attr, 0, sizeof(attr));
      attr.field_mask = UCP_REQUEST_ATTR_FIELD_INFO_STRING | UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE;
      attr.debug_string = text;
      attr.debug_string_size = sizeof(text);
      if (ucp_request_query(r, &attr) == UCS_OK) op->protocol = text;
    }
  }
  worker_->Posted(op, r);
  return promise;
}

Napi::Value Endpoint::SendTag(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint64_t tag = ToU64(info[0], "tag");
  uint8_t* p; size_t l; bool det;
  if (!BufferSpan(info[1], &p, &l, &det)) throw Napi::TypeError::New(env, "sendTag: expected a Buffer");
  double timeoutMs = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : 0;
  if (state_ != OPEN || !ep_) return NotOpen(env);
  Op* op = new Op(Op::SEND, worker_, env);
  op->ep = this;
  op->keep1 = Napi::Persistent(info[1].As<Napi::Object>());   // send buffer alive until completion
  op->keep3 = Napi::Persistent(Value());
  if (timeoutMs > 0) op->deadline = uv_now(worker_->loop_) + static_cast<uint64_t>(timeoutMs);
  Napi::Value promise = op->deferred.Promise();
  worker_->Track(op);
  ucp_request_param_t rp = SendParams(op);
  worker_->Posted(op, ucp_tag_send_nbx(ep_, p, l, tag, &rp));
  return promise;
}

Napi::Value Endpoint::Flush(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double timeoutMs = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : 0;
  if (state_ != OPEN || !ep_) return NotOpen(env);
  Op* op = new Op(Op::FLUSH, worker_, env);
  op->ep = this;
  op->keep3 = Napi::Persistent(Value());
  if (timeoutMs > 0) op->deadline = uv_now(worker_->loop_) + static_cast<uint64_t>(timeoutMs);
  Napi::Value promise = op->deferred.Promise();
  worker_->Track(op);
  ucp_request_param_t rp = SendParams(op);
  worker_->Posted(op, ucp_ep_flush_nbx(ep_, &rp));
  return promise;
}

}  // namespace robustrl::ucx
