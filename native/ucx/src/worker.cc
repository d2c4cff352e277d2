// Worker (see worker.h): context/worker lifetime, the progress loop (Drive / Deliver / CheckDeadlines),
// and the JS methods that create endpoints, listeners, mappings and receives.
#include "worker.h"

#include "cuda_driver.h"

#include <limits>

#include "context.h"
#include "endpoint.h"
#include "errors.h"
#include "listener.h"
#include "mapping.h"
#include "remote_key.h"

namespace robustrl::ucx {

constexpr uint64_t kBudgetNs = 2000000;  // max continuous progress per event-loop turn (2 ms)

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

Endpoint* Worker::NewEndpoint(ucp_ep_params_t* params, bool peerErrors) {
  Napi::Env env = Env();
  Napi::Object obj = ctors()->endpoint.New({});
  Endpoint* e = Endpoint::Unwrap(obj);
  params->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params->err_mode = peerErrors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params->err_handler.cb = &Endpoint::ErrCb;
  params->err_handler.arg = e;
  e->worker_ = this;  // ErrCb may fire during ucp_ep_create
  e->peerErrors_ = peerErrors;
  ucp_ep_h ep = nullptr;
  ucs_status_t st = ucp_ep_create(worker_, params, &ep);
  if (st != UCS_OK) {
    MakeError(env, "peer", st, "ucp_ep_create failed").ThrowAsJavaScriptException();
    return nullptr;
  }
  e->Setup(this, ep);
  Kick();
  return e;
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

#define REQUIRE_OPEN(env)                                                                     \
  if (closed_) { MakeError(env, "closed", UCS_OK, "worker is closed").ThrowAsJavaScriptException(); return env.Undefined(); }

Napi::Value Worker::Listen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  std::string host = info[0].As<Napi::String>().Utf8Value();
  int port = info[1].As<Napi::Number>().Int32Value();
  if (!info[2].IsFunction()) throw Napi::TypeError::New(env, "listen: callback required");
  Napi::Object obj = ctors()->listener.New({});
  Listener* l = Listener::Unwrap(obj);
  l->Setup(this, host, port, info[2].As<Napi::Function>());
  return obj;
}

Napi::Value Worker::Connect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (closed_) return RejectedPromise(env, MakeError(env, "closed", UCS_OK, "worker is closed"));
  std::string host = info[0].As<Napi::String>().Utf8Value();
  int port = info[1].As<Napi::Number>().Int32Value();
  double timeoutMs = info.Length() > 2 && info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : 0;
  sockaddr_in sa;
  if (!ParseSockaddr(host, port, &sa)) throw Napi::TypeError::New(env, "connect: invalid IPv4 address " + host);
  ucp_ep_params_t p;
  std::memset(&p, 0, sizeof(p));
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  p.sockaddr.addrlen = sizeof(sa);
  Endpoint* e = NewEndpoint(&p);
  if (!e) return env.Undefined();
  return StartConnect(e, timeoutMs);
}

// Worker address (ucp_worker_get_address): opaque bytes that let a peer create an endpoint to this
// worker directly with connectAddress(), without the sockaddr connection manager. It lists every
// transport of this worker (shared memory, cma, tcp, ...), so a peer on the same host can use shm/cma.
Napi::Value Worker::Address(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  ucp_address_t* a = nullptr;
  size_t len = 0;
  ucs_status_t st = ucp_worker_get_address(worker_, &a, &len);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_worker_get_address failed");
  Napi::Buffer<uint8_t> out = Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<uint8_t*>(a), len);
  ucp_worker_release_address(worker_, a);
  return out;
}

// connectAddress(addressBuffer, timeoutMs): ucp_ep_create(REMOTE_ADDRESS), same peer error handling
// as sockaddr endpoints; resolves after an ep flush (wire-up done).
Napi::Value Worker::ConnectAddress(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (closed_) return RejectedPromise(env, MakeError(env, "closed", UCS_OK, "worker is closed"));
  uint8_t* p; size_t l; bool det;
  if (!BufferSpan(info[0], &p, &l, &det) || l == 0)
    throw Napi::TypeError::New(env, "connectAddress: expected a non-empty Buffer with a worker address");
  double timeoutMs = info.Length() > 1 && info[1].IsNumber() ? info[1].As<Napi::Number>().DoubleValue() : 0;
  // errorHandling: "peer" (default, UCP_ERR_HANDLING_MODE_PEER) or "none". On UCX 1.13 the shared
  // memory / cma transports do not support peer failure handling, so "peer" restricts the ep to tcp.
  bool peerErrors = true;
  if (info.Length() > 2 && info[2].IsString()) {
    std::string m = info[2].As<Napi::String>().Utf8Value();
    if (m == "none") peerErrors = false;
    else if (m != "peer") throw Napi::TypeError::New(env, "connectAddress: errorHandling must be 'peer' or 'none'");
  }
  ucp_ep_params_t ep;
  std::memset(&ep, 0, sizeof(ep));
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  ep.address = reinterpret_cast<const ucp_address_t*>(p);  // unpacked by ucp_ep_create, not kept
  Endpoint* e = NewEndpoint(&ep, peerErrors);
  if (!e) return env.Undefined();
  return StartConnect(e, timeoutMs);
}

Napi::Value Worker::StartConnect(Endpoint* e, double timeoutMs) {
  Napi::Env env = Env();
  // Connection establishment completes when a flush on the new endpoint completes.
  Op* op = new Op(Op::CONNECT, this, env);
  op->ep = e;
  op->keep1 = Napi::Persistent(e->Value());
  if (timeoutMs > 0) op->deadline = uv_now(loop_) + static_cast<uint64_t>(timeoutMs);
  Napi::Value promise = op->deferred.Promise();
  Track(op);
  ucp_request_param_t rp = SendParams(op);
  Posted(op, ucp_ep_flush_nbx(e->ep(), &rp));
  return promise;
}

// The optional access argument of map*: 'read-write' (default) or 'remote-read'.
static bool RemoteReadOnly(Napi::Env env, const Napi::CallbackInfo& info, size_t index, const char* what) {
  if (info.Length() <= index || info[index].IsUndefined()) return false;
  std::string access = info[index].IsString() ? info[index].As<Napi::String>().Utf8Value() : "";
  if (access == "read-write") return false;
  if (access == "remote-read") return true;
  throw Napi::TypeError::New(env, std::string(what) + ": access must be 'read-write' or 'remote-read'");
}

Napi::Value Worker::Map(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  bool readOnly = RemoteReadOnly(env, info, 1, "map");
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetRemoteReadOnly(readOnly);
  Mapping::Unwrap(obj)->Setup(this, info[0]);
  return obj;
}

// mapAlloc(length): UCX allocates the memory (UCP_MEM_MAP_ALLOCATE), so it can come from the posix/sysv
// shared-memory md and its rkey lets a same-host peer use the posix/sysv RMA lanes (user memory can only
// be registered by cma/tcp). Exposed as an external ArrayBuffer that unmap() detaches before freeing.
Napi::Value Worker::MapAlloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  uint64_t len = ToU64(info[0], "length");
  if (len == 0) throw Napi::RangeError::New(env, "mapAlloc: zero length");
  bool readOnly = RemoteReadOnly(env, info, 1, "mapAlloc");
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetRemoteReadOnly(readOnly);
  Mapping::Unwrap(obj)->SetupAlloc(this, len);
  return obj;
}

// mapFile(path, length, create)
Napi::Value Worker::MapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  if (!info[0].IsString()) throw Napi::TypeError::New(env, "mapFile: path must be a string");
  std::string path = info[0].As<Napi::String>().Utf8Value();
  if (path.empty() || path.find('\0') != std::string::npos) throw Napi::TypeError::New(env, "mapFile: invalid path");
  uint64_t len = ToU64(info[1], "length");
  if (len == 0) throw Napi::RangeError::New(env, "mapFile: zero length");
  if (len > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) throw Napi::RangeError::New(env, "mapFile: length too large");
  bool create = info.Length() > 2 && info[2].ToBoolean();
  bool readOnly = RemoteReadOnly(env, info, 3, "mapFile");
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetRemoteReadOnly(readOnly);
  Mapping::Unwrap(obj)->SetupFile(this, path, len, create);
  return obj;
}

Napi::Value Worker::CudaSupportedJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  return Napi::Boolean::New(env, (ContextMemoryTypes(ctx_) & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0);
}

// mapDevice(address, length, memoryType): only 'cuda' for now.
Napi::Value Worker::MapDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  uint64_t addr = ToU64(info[0], "address");
  uint64_t len = ToU64(info[1], "length");
  std::string type = info.Length() > 2 && info[2].IsString() ? info[2].As<Napi::String>().Utf8Value() : "";
  if (type != "cuda") throw Napi::TypeError::New(env, "mapDevice: memoryType must be 'cuda'");
  if (addr == 0) throw Napi::TypeError::New(env, "mapDevice: address is null");
  if (len == 0) throw Napi::RangeError::New(env, "mapDevice: zero length");
  if ((ContextMemoryTypes(ctx_) & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) == 0)
    throw MakeError(env, "unavailable", UCS_ERR_UNSUPPORTED,
                    "mapDevice: this UCX context cannot register CUDA memory (UCX built without CUDA support, "
                    "no cuda_copy transport loaded, or UCX_TLS/UCX_MEMTYPE settings exclude it); "
                    "ucxInfo().cudaSupported tells in advance");
  bool readOnly = RemoteReadOnly(env, info, 3, "mapDevice");
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetRemoteReadOnly(readOnly);
  Mapping::Unwrap(obj)->SetupDevice(this, addr, len, UCS_MEMORY_TYPE_CUDA);
  return obj;
}

// mapIpc(handle, offset, length, device, access, copy): device memory another process exported as a CUDA IPC
// handle (a framework's tensors), opened in `device`'s primary context and registered for RMA; the handle
// is closed when the region is unmapped (Mapping::DoUnmap). The memory type is what the driver says the
// opened pointer is.
Napi::Value Worker::MapIpc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  uint8_t* handle = nullptr; size_t handleLen = 0; bool det = false;
  if (!BufferSpan(info[0], &handle, &handleLen, &det) || handleLen != cuda::kIpcHandleBytes)
    throw Napi::TypeError::New(env, "mapIpc: handle must be the " + std::to_string(cuda::kIpcHandleBytes) + " bytes of a CUDA IPC memory handle");
  uint64_t offset = ToU64(info[1], "offset");
  uint64_t len = ToU64(info[2], "length");
  if (len == 0) throw Napi::RangeError::New(env, "mapIpc: zero length");
  if (!info[3].IsNumber() || info[3].As<Napi::Number>().DoubleValue() < 0) throw Napi::TypeError::New(env, "mapIpc: device must be a CUDA device ordinal");
  int device = static_cast<int>(info[3].As<Napi::Number>().DoubleValue());
  bool readOnly = RemoteReadOnly(env, info, 4, "mapIpc");
  bool copy = info.Length() > 5 && info[5].ToBoolean().Value();
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetRemoteReadOnly(readOnly);
  Mapping::Unwrap(obj)->SetupIpc(this, handle, offset, len, device, copy);
  return obj;
}

Napi::Value Worker::RecvTag(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (closed_) return RejectedPromise(env, MakeError(env, "closed", UCS_OK, "worker is closed"));
  uint64_t tag = ToU64(info[0], "tag");
  uint64_t mask = ToU64(info[1], "tagMask");
  Napi::Value bufv = info[2];
  double timeoutMs = info.Length() > 3 && info[3].IsNumber() ? info[3].As<Napi::Number>().DoubleValue() : 0;
  uint8_t* p; size_t l; bool det;
  if (!BufferSpan(bufv, &p, &l, &det)) throw Napi::TypeError::New(env, "recvTag: expected a Buffer");
  Op* op = new Op(Op::RECV, this, env);
  op->keep1 = Napi::Persistent(bufv.As<Napi::Object>());
  if (timeoutMs > 0) op->deadline = uv_now(loop_) + static_cast<uint64_t>(timeoutMs);
  Napi::Value promise = op->deferred.Promise();
  Track(op);
  ucp_request_param_t rp;
  std::memset(&rp, 0, sizeof(rp));
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  // No immediate completion: UCX 1.13 returned UCS_OK without filling recv_info for a message
  // already in the unexpected queue (tcp), so force completion through RecvCb, which gets the info.
  rp.op_attr_mask |= UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  rp.cb.recv = &Worker::RecvCb;
  rp.user_data = op;
  op->ucxDone = false;
  ucs_status_ptr_t r = ucp_tag_recv_nbx(worker_, p, l, tag, mask, &rp);
  Posted(op, r);
  return promise;
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
