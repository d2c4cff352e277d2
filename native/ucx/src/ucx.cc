// @robustrl/ucx — node-addon-api binding over UCX UCP (built when pkg-config finds UCX).
//
// Threading/progress model: one ucp_context + one ucp_worker (UCS_THREAD_MODE_SINGLE) per
// Worker object, all on the Node main thread. The worker's wakeup fd (ucp_worker_get_efd) is
// watched by a uv_poll_t; on every wake we progress until idle, deliver completions to JS
// and re-arm (ucp_worker_arm; UCS_ERR_BUSY -> progress again). UCX callbacks never touch JS:
// they only queue completions, which are delivered after progress returns, inside a
// CallbackScope so that promise reactions run. A uv_idle "kick" runs one progress pass right
// after an operation is posted, and a 10 ms uv_timer runs only while operations are in flight
// (deadline checks + safety net against a missed wakeup). Nothing runs when idle.
#include <napi.h>
#include <uv.h>
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

constexpr uint64_t kBudgetNs = 2000000;  // max continuous progress per event-loop turn (2 ms)

class Worker;
class Endpoint;
class Mapping;
class RemoteKey;
class Listener;

struct Constructors {
  Napi::FunctionReference worker, endpoint, mapping, rkey, listener;
};

const char* StatusName(ucs_status_t s) {
  switch (s) {
#define C(x) case x: return #x;
    C(UCS_OK) C(UCS_INPROGRESS) C(UCS_ERR_NO_MESSAGE) C(UCS_ERR_NO_RESOURCE) C(UCS_ERR_IO_ERROR)
    C(UCS_ERR_NO_MEMORY) C(UCS_ERR_INVALID_PARAM) C(UCS_ERR_UNREACHABLE) C(UCS_ERR_INVALID_ADDR)
    C(UCS_ERR_NOT_IMPLEMENTED) C(UCS_ERR_MESSAGE_TRUNCATED) C(UCS_ERR_NO_PROGRESS)
    C(UCS_ERR_BUFFER_TOO_SMALL) C(UCS_ERR_NO_ELEM) C(UCS_ERR_SOME_CONNECTS_FAILED)
    C(UCS_ERR_NO_DEVICE) C(UCS_ERR_BUSY) C(UCS_ERR_CANCELED) C(UCS_ERR_SHMEM_SEGMENT)
    C(UCS_ERR_ALREADY_EXISTS) C(UCS_ERR_OUT_OF_RANGE) C(UCS_ERR_TIMED_OUT)
    C(UCS_ERR_EXCEEDS_LIMIT) C(UCS_ERR_UNSUPPORTED) C(UCS_ERR_REJECTED) C(UCS_ERR_NOT_CONNECTED)
    C(UCS_ERR_CONNECTION_RESET) C(UCS_ERR_ENDPOINT_TIMEOUT)
#undef C
    default: return "UCS_ERR_UNKNOWN";
  }
}

bool IsPeerFailure(ucs_status_t s) {
  return s == UCS_ERR_UNREACHABLE || s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT ||
         s == UCS_ERR_REJECTED || s == UCS_ERR_NOT_CONNECTED || s == UCS_ERR_TIMED_OUT ||
         s == UCS_ERR_IO_ERROR;
}

// kind: "unavailable" | "peer" | "closed" | "timeout" | "ucx" — the TS facade maps it to a class.
Napi::Error MakeError(Napi::Env env, const char* kind, ucs_status_t status, const std::string& msg) {
  std::string full = msg;
  if (status != UCS_OK) full += std::string(" (") + StatusName(status) + ": " + ucs_status_string(status) + ")";
  Napi::Error e = Napi::Error::New(env, full);
  e.Set("ucxKind", Napi::String::New(env, kind));
  e.Set("code", Napi::String::New(env, status == UCS_OK ? "UCX_ERROR" : StatusName(status)));
  e.Set("status", Napi::Number::New(env, static_cast<int>(status)));
  return e;
}

// errno -> its symbolic name (strerrorname_np needs glibc 2.32; this covers what open/fstat/ftruncate/mmap
// can return).
const char* ErrnoName(int err) {
  switch (err) {
#define E(x) case x: return #x;
    E(ENOENT) E(EACCES) E(EPERM) E(EISDIR) E(ENOTDIR) E(ENOSPC) E(ENOMEM) E(EINVAL) E(EFBIG) E(EMFILE)
    E(ENFILE) E(ENAMETOOLONG) E(ELOOP) E(EROFS) E(ENODEV) E(ETXTBSY) E(EOVERFLOW) E(EEXIST) E(EBUSY)
    E(EFAULT) E(EBADF) E(EIO) E(EAGAIN) E(ENXIO) E(EINTR) E(EDQUOT)
#undef E
    default: return nullptr;
  }
}

// An OS call failed (mapFile): ucxKind "ucx", code = the errno name (ENOENT, EACCES, ...), plus
// errno / syscall / path like Node's own fs errors, so callers can branch on e.code.
Napi::Error MakeErrnoError(Napi::Env env, int err, const char* syscall, const std::string& path, const std::string& msg) {
  const char* name = ErrnoName(err);
  std::string full = msg + ": " + syscall + "('" + path + "') failed: " + std::strerror(err) + " (" + (name ? name : "?") + ")";
  Napi::Error e = Napi::Error::New(env, full);
  e.Set("ucxKind", Napi::String::New(env, "ucx"));
  e.Set("code", Napi::String::New(env, name ? name : "UCX_ERROR"));
  e.Set("status", Napi::Number::New(env, 0));
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("syscall", Napi::String::New(env, syscall));
  e.Set("path", Napi::String::New(env, path));
  return e;
}

Napi::Value RejectedPromise(Napi::Env env, Napi::Error err) {
  auto d = Napi::Promise::Deferred::New(env);
  d.Reject(err.Value());
  return d.Promise();
}

uint64_t ToU64(const Napi::Value& v, const char* what) {
  if (v.IsBigInt()) {
    bool lossless = true;
    uint64_t r = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throw Napi::RangeError::New(v.Env(), std::string(what) + " out of range");
    return r;
  }
  if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (d < 0 || d > 9007199254740991.0 || d != static_cast<double>(static_cast<uint64_t>(d)))
      throw Napi::RangeError::New(v.Env(), std::string(what) + " must be a non-negative integer");
    return static_cast<uint64_t>(d);
  }
  throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a bigint or number");
}

bool ParseSockaddr(const std::string& host, int port, sockaddr_in* sa) {
  std::memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &sa->sin_addr) == 1;
}

// Gets (ptr, len) of a Buffer / TypedArray / DataView / ArrayBuffer; false if detached / not a buffer.
bool BufferSpan(const Napi::Value& v, uint8_t** ptr, size_t* len, bool* detached) {
  *detached = false;
  if (v.IsArrayBuffer()) {
    auto ab = v.As<Napi::ArrayBuffer>();
    if (ab.IsDetached()) { *detached = true; return false; }
    *ptr = static_cast<uint8_t*>(ab.Data());
    *len = ab.ByteLength();
    return true;
  }
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    if (ta.ArrayBuffer().IsDetached()) { *detached = true; return false; }
    *ptr = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    *len = ta.ByteLength();
    return true;
  }
  if (v.IsDataView()) {
    auto dv = v.As<Napi::DataView>();
    if (dv.ArrayBuffer().IsDetached()) { *detached = true; return false; }
    *ptr = static_cast<uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset();
    *len = dv.ByteLength();
    return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
struct Op {
  enum Kind { GET, PUT, SEND, RECV, CONNECT, FLUSH, CLOSE };
  Kind kind;
  Worker* worker;
  Endpoint* ep = nullptr;         // null for RECV
  Mapping* mapping = nullptr;     // GET/PUT: inflight counter on the mapping
  Napi::Promise::Deferred deferred;
  Napi::ObjectReference keep1, keep2, keep3;  // JS objects kept alive while UCX may touch memory
  void* req = nullptr;            // UCX request while in flight
  bool ucxDone = true;            // true when no UCX request is outstanding
  bool settled = false;           // JS promise already settled (e.g. by timeout)
  bool queued = false;            // a completion for this op sits in Worker::completions_
  bool orphaned = false;          // settled, its endpoint is closed, and UCX may never complete it (see Endpoint::Closed)
  int stage = 0;                  // PUT: 0 = put, 1 = flush
  uint64_t deadline = 0;          // uv_now() ms, 0 = none
  // RECV results
  ucp_tag_t senderTag = 0;
  size_t length = 0;
  Op(Kind k, Worker* w, Napi::Env env) : kind(k), worker(w), deferred(Napi::Promise::Deferred::New(env)) {}
};

struct ConnRequest {
  Listener* listener;
  ucp_conn_request_h req;
};

// ---------------------------------------------------------------------------------------------
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

  // Post helpers: take a ucs_status_ptr_t returned by an nbx call.
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

// ---------------------------------------------------------------------------------------------
class Mapping : public Napi::ObjectWrap<Mapping> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Mapping(const Napi::CallbackInfo& info);
  ~Mapping() override { DoUnmap(); }

  // What the registered memory is; decides what unmap() must release besides the memh.
  enum Kind {
    USER,       // map(): a JS Buffer/ArrayBuffer; kept referenced while mapped
    UCX_ALLOC,  // mapAlloc(): UCP_MEM_MAP_ALLOCATE; buf_ is an external ArrayBuffer over UCX's memory
    FILE_MMAP,  // mapFile(): our MAP_SHARED mmap of a file; buf_ is an external ArrayBuffer over it
    DEVICE,     // mapDevice(): device memory (CUDA); no host view, buf_ empty
  };

  // Set up by Worker::Map / MapAlloc / MapFile / MapDevice.
  Napi::Value Setup(Worker* w, Napi::Value buf);
  Napi::Value SetupAlloc(Worker* w, size_t length);
  Napi::Value SetupFile(Worker* w, const std::string& path, size_t length, bool create);
  Napi::Value SetupDevice(Worker* w, uint64_t address, size_t length, ucs_memory_type_t type);
  bool Usable() const { return memh_ != nullptr && !unmapRequested_; }
  bool CheckAlive() {  // detached ArrayBuffer = memory may be gone
    if (kind_ == DEVICE) return true;  // no JS object owns device memory; the caller keeps it allocated
    uint8_t* p; size_t l; bool det;
    Napi::Value v = buf_.Value();
    if (!BufferSpan(v, &p, &l, &det)) return false;
    return p == ptr_ && l >= len_;
  }
  uint8_t* ptr() const { return ptr_; }
  size_t len() const { return len_; }
  ucp_mem_h memh() const { return memh_; }
  void OpStarted() { inflight_++; }
  void OpDone() { if (--inflight_ == 0 && unmapRequested_) DoUnmap(); }
  void DoUnmap();

 private:
  Napi::Value PackRkey(const Napi::CallbackInfo& info);
  Napi::Value Unmap(const Napi::CallbackInfo& info);
  Napi::Value Address(const Napi::CallbackInfo& info) { return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr_))); }
  Napi::Value Length(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(len_)); }
  Napi::Value Mapped(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), Usable()); }
  Napi::Value BufferJs(const Napi::CallbackInfo& info) { return buf_.IsEmpty() ? info.Env().Null() : buf_.Value(); }
  Napi::Value MemoryTypeJs(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), kind_ == DEVICE ? ucs_memory_type_names[memType_] : "host");
  }
  void Register(Worker* w, const char* what);  // ucp_mem_map(ptr_, len_, memType_) + pin; throws

  Worker* worker_ = nullptr;
  Napi::ObjectReference workerRef_;
  Napi::ObjectReference buf_;   // keeps the Buffer/ArrayBuffer alive while mapped
  uint8_t* ptr_ = nullptr;
  size_t len_ = 0;
  ucp_mem_h memh_ = nullptr;
  int inflight_ = 0;
  bool unmapRequested_ = false;
  Kind kind_ = USER;
  ucs_memory_type_t memType_ = UCS_MEMORY_TYPE_HOST;
};

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------
class Listener : public Napi::ObjectWrap<Listener> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Listener(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Listener>(info) {}
  ~Listener() override {}
  static void ConnCb(ucp_conn_request_h req, void* arg) {
    auto* self = static_cast<Listener*>(arg);
    self->worker_->QueueConn(self, req);
  }
  Napi::Value Setup(Worker* w, const std::string& host, int port, Napi::Function cb);
  void Shutdown() {
    if (listener_) {
      ucp_listener_destroy(listener_);
      listener_ = nullptr;
      worker_->RemoveListener(this);
      cb_.Reset();
      Unref();
    }
  }
  bool active() const { return listener_ != nullptr; }
  Worker* worker() const { return worker_; }
  Napi::FunctionReference& cb() { return cb_; }
 private:
  Napi::Value Port(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), port_); }
  Napi::Value Close(const Napi::CallbackInfo& info) { Shutdown(); return info.Env().Undefined(); }
  Worker* worker_ = nullptr;
  Napi::ObjectReference workerRef_;
  ucp_listener_h listener_ = nullptr;
  int port_ = 0;
  Napi::FunctionReference cb_;
};

// =============================================================================================
// Worker
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
    InstanceMethod<&Worker::CudaSupportedJs>("cudaSupported"),
    InstanceMethod<&Worker::RecvTag>("recvTag"),
    InstanceMethod<&Worker::Close>("close"),
    InstanceMethod<&Worker::Stats>("stats"),
  });
}

Worker::Worker(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Worker>(info) {
  Napi::Env env = info.Env();
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) { MakeError(env, "ucx", st, "ucp_config_read failed").ThrowAsJavaScriptException(); return; }
  // Options: { config: { KEY: "value" } } → ucp_config_modify (keys without the UCX_ prefix).
  if (info.Length() > 0 && info[0].IsObject()) {
    Napi::Object opts = info[0].As<Napi::Object>();
    if (opts.Has("config") && opts.Get("config").IsObject()) {
      Napi::Object cfg = opts.Get("config").As<Napi::Object>();
      Napi::Array keys = cfg.GetPropertyNames();
      for (uint32_t i = 0; i < keys.Length(); i++) {
        std::string k = keys.Get(i).ToString().Utf8Value();
        std::string v = cfg.Get(k).ToString().Utf8Value();
        if (k.rfind("UCX_", 0) == 0) k = k.substr(4);
        st = ucp_config_modify(config, k.c_str(), v.c_str());
        if (st != UCS_OK) {
          ucp_config_release(config);
          MakeError(env, "ucx", st, "ucp_config_modify(" + k + "=" + v + ") failed").ThrowAsJavaScriptException();
          return;
        }
      }
    }
  }
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &ctx_);
  ucp_config_release(config);
  if (st != UCS_OK) { MakeError(env, "ucx", st, "ucp_init failed").ThrowAsJavaScriptException(); return; }

  ucp_worker_params_t wp;
  std::memset(&wp, 0, sizeof(wp));
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(ctx_, &wp, &worker_);
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

void Worker::Posted(Op* op, ucs_status_ptr_t p) {
  if (p == nullptr) {  // completed immediately
    op->ucxDone = true;
    QueueCompletion(op, UCS_OK);
  } else if (UCS_PTR_IS_ERR(p)) {
    op->ucxDone = true;
    QueueCompletion(op, UCS_PTR_STATUS(p));
  } else {
    // The callback may already have run inside the nbx call (then it freed the request).
    if (!op->ucxDone) op->req = p;
  }
}

void Worker::SendCb(void* request, ucs_status_t status, void* user) {
  Op* op = static_cast<Op*>(user);
  op->ucxDone = true;
  op->req = nullptr;
  ucp_request_free(request);
  op->worker->QueueCompletion(op, status);
}

void Worker::RecvCb(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user) {
  Op* op = static_cast<Op*>(user);
  op->ucxDone = true;
  op->req = nullptr;
  if (status == UCS_OK && info) { op->senderTag = info->sender_tag; op->length = info->length; }
  ucp_request_free(request);
  op->worker->QueueCompletion(op, status);
}

void Worker::Settle(Op* op, ucs_status_t st) {
  if (op->settled) return;
  op->settled = true;
  Napi::Env env = Env();
  if (st == UCS_OK) {
    switch (op->kind) {
      case Op::RECV: {
        Napi::Object r = Napi::Object::New(env);
        r.Set("data", op->keep1.Value());
        r.Set("length", Napi::Number::New(env, static_cast<double>(op->length)));
        r.Set("senderTag", Napi::BigInt::New(env, static_cast<uint64_t>(op->senderTag)));
        op->deferred.Resolve(r);
        break;
      }
      case Op::CONNECT:
        op->deferred.Resolve(op->ep->Value());
        break;
      default:
        op->deferred.Resolve(env.Undefined());
    }
    return;
  }
  const char* kind = "ucx";
  std::string msg = "UCX operation failed";
  Endpoint* e = op->ep;
  if (op->kind == Op::CONNECT) {
    kind = "peer"; msg = "could not connect to peer";
  } else if (e && e->timedOut() && st == UCS_ERR_CANCELED) {
    kind = "closed"; msg = "endpoint was force-closed after an operation timed out";
  } else if (e && e->failStatus() != UCS_OK) {
    kind = "peer";
    msg = std::string("peer failure on endpoint (") + StatusName(e->failStatus()) + ")";
  } else if (e && e->userClosed() && st == UCS_ERR_CANCELED) {
    kind = "closed"; msg = "endpoint closed while operation was pending";
  } else if (IsPeerFailure(st)) {
    kind = "peer"; msg = "peer unreachable";
  } else if (st == UCS_ERR_CANCELED) {
    kind = "closed"; msg = closed_ ? "worker closed while operation was pending" : "operation canceled";
  }
  op->deferred.Reject(MakeError(env, kind, st, msg).Value());
}

void Worker::MaybeFree(Op* op) {
  if (!op->settled || !op->ucxDone || op->queued) return;
  if (op->mapping) op->mapping->OpDone();
  Untrack(op);
  if (op->kind == Op::CLOSE && op->ep) op->ep->Closed();
  delete op;
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

Napi::Value Listener::Setup(Worker* w, const std::string& host, int port, Napi::Function cb) {
  Napi::Env env = Env();
  sockaddr_in sa;
  if (!ParseSockaddr(host, port, &sa)) throw Napi::TypeError::New(env, "listen: invalid IPv4 address " + host);
  ucp_listener_params_t p;
  std::memset(&p, 0, sizeof(p));
  p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&sa);
  p.sockaddr.addrlen = sizeof(sa);
  p.conn_handler.cb = &Listener::ConnCb;
  p.conn_handler.arg = this;
  worker_ = w;
  ucs_status_t st = ucp_listener_create(w->worker(), &p, &listener_);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_listener_create(" + host + ":" + std::to_string(port) + ") failed");
  ucp_listener_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucp_listener_query(listener_, &a) == UCS_OK)
    port_ = ntohs(reinterpret_cast<sockaddr_in*>(&a.sockaddr)->sin_port);
  cb_ = Napi::Persistent(cb);
  workerRef_ = Napi::Persistent(w->Value());
  Ref();  // pinned while listening
  w->AddListener(this);
  w->Kick();
  return env.Undefined();
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

// Parameters of a UCX operation that completes through Worker::SendCb (send, put, get, flush,
// close); marks the op as having a UCX request outstanding until the callback or Posted says so.
static ucp_request_param_t SendParams(Op* op, uint32_t extraFields = 0) {
  ucp_request_param_t rp;
  std::memset(&rp, 0, sizeof(rp));
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | extraFields;
  rp.cb.send = &Worker::SendCb;
  rp.user_data = op;
  op->ucxDone = false;
  return rp;
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

Napi::Value Worker::Map(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  REQUIRE_OPEN(env);
  Napi::Object obj = ctors()->mapping.New({});
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
  Napi::Object obj = ctors()->mapping.New({});
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
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetupFile(this, path, len, create);
  return obj;
}

// Memory types this worker's context can register (ucp_context_query UCP_ATTR_FIELD_MEMORY_TYPES).
// UCX sets UCS_MEMORY_TYPE_CUDA only when a CUDA-capable md (cuda_copy) was loaded, i.e. a UCX built
// with CUDA and a usable driver.
static uint64_t ContextMemoryTypes(ucp_context_h ctx) {
  ucp_context_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ctx, &a) != UCS_OK) return UCS_BIT(UCS_MEMORY_TYPE_HOST);
  return a.memory_types;
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
  Napi::Object obj = ctors()->mapping.New({});
  Mapping::Unwrap(obj)->SetupDevice(this, addr, len, UCS_MEMORY_TYPE_CUDA);
  return obj;
}

Napi::Value Mapping::SetupAlloc(Worker* w, size_t length) {
  Napi::Env env = Env();
  ucp_mem_map_params_t mp;
  std::memset(&mp, 0, sizeof(mp));
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                  UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = nullptr;
  mp.length = length;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  mp.memory_type = UCS_MEMORY_TYPE_HOST;
  ucs_status_t st = ucp_mem_map(w->ctx(), &mp, &memh_);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_mem_map(ALLOCATE) failed");
  ucp_mem_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  st = ucp_mem_query(memh_, &a);
  if (st != UCS_OK) { ucp_mem_unmap(w->ctx(), memh_); memh_ = nullptr; throw MakeError(env, "ucx", st, "ucp_mem_query failed"); }
  worker_ = w;
  ptr_ = static_cast<uint8_t*>(a.address);
  len_ = length;  // a.length may be rounded up
  kind_ = UCX_ALLOC;
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, ptr_, len_);  // external, no finalizer: UCX owns it
  buf_ = Napi::Persistent(ab.As<Napi::Object>());
  workerRef_ = Napi::Persistent(w->Value());
  Ref();
  w->AddMapping(this);
  return env.Undefined();
}

Napi::Value Mapping::Setup(Worker* w, Napi::Value buf) {
  Napi::Env env = Env();
  uint8_t* p; size_t l; bool det;
  if (!BufferSpan(buf, &p, &l, &det))
    throw Napi::TypeError::New(env, det ? "map: buffer is detached" : "map: expected Buffer, TypedArray, DataView or ArrayBuffer");
  if (l == 0) throw Napi::RangeError::New(env, "map: zero-length buffer");
  // Host memory only; device pointers go through Worker::MapDevice (UCS_MEMORY_TYPE_CUDA).
  ptr_ = p;
  len_ = l;
  memType_ = UCS_MEMORY_TYPE_HOST;
  Register(w, "map");
  buf_ = Napi::Persistent(buf.As<Napi::Object>());     // keep the JS memory alive while mapped
  return env.Undefined();
}

// Registers [ptr_, ptr_ + len_) of memType_ with the worker's context (no ALLOCATE: the memory belongs
// to someone else: a JS buffer, our own file mapping or the caller's device allocation) and pins the Mapping.
void Mapping::Register(Worker* w, const char* what) {
  Napi::Env env = Env();
  ucp_mem_map_params_t mp;
  std::memset(&mp, 0, sizeof(mp));
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = ptr_;
  mp.length = len_;
  mp.memory_type = memType_;
  ucs_status_t st = ucp_mem_map(w->ctx(), &mp, &memh_);
  if (st != UCS_OK) { memh_ = nullptr; throw MakeError(env, "ucx", st, std::string(what) + ": ucp_mem_map failed"); }
  worker_ = w;
  workerRef_ = Napi::Persistent(w->Value());
  Ref();  // pinned until unmap()/worker.close()
  w->AddMapping(this);
}

// mapFile(path, length, create): open + (create: O_CREAT, grow with ftruncate) + mmap(MAP_SHARED) +
// ucp_mem_map of the mapping. The fd is closed right after mmap (the mapping keeps the file alive).
// Typical use: a trainer writes a weight version to /dev/shm/<name>; the agent maps that file and
// serves GETs from it (or pulls into it) without copying it into a Node Buffer first.
Napi::Value Mapping::SetupFile(Worker* w, const std::string& path, size_t length, bool create) {
  Napi::Env env = Env();
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) throw MakeErrnoError(env, errno, "open", path, "mapFile");
  struct stat sb;
  if (fstat(fd, &sb) != 0) { int e = errno; close(fd); throw MakeErrnoError(env, e, "fstat", path, "mapFile"); }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    throw Napi::TypeError::New(env, "mapFile: '" + path + "' is not a regular file");
  }
  uint64_t size = static_cast<uint64_t>(sb.st_size);
  if (size < length) {
    if (!create) {
      close(fd);
      throw Napi::RangeError::New(env, "mapFile: '" + path + "' is " + std::to_string(size) + " bytes, smaller than the requested length " +
                                           std::to_string(length) + " (pass { create: true } to grow it)");
    }
    // Grow only: shrinking a file that another process has mapped would make its accesses SIGBUS.
    // On tmpfs this reserves nothing; pages are allocated when first written.
    if (ftruncate(fd, static_cast<off_t>(length)) != 0) { int e = errno; close(fd); throw MakeErrnoError(env, e, "ftruncate", path, "mapFile"); }
  }
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int mmapErr = errno;
  close(fd);
  if (p == MAP_FAILED) throw MakeErrnoError(env, mmapErr, "mmap", path, "mapFile");
  ptr_ = static_cast<uint8_t*>(p);
  len_ = length;
  kind_ = FILE_MMAP;
  try {
    Register(w, "mapFile");
  } catch (...) {
    munmap(p, length);
    ptr_ = nullptr; len_ = 0;
    throw;
  }
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, ptr_, len_);  // external, no finalizer: DoUnmap munmaps
  buf_ = Napi::Persistent(ab.As<Napi::Object>());
  return env.Undefined();
}

// mapDevice(address, length, type): registers memory the caller allocated on a device (e.g. a CUDA
// tensor's data_ptr). UCX keeps no reference to an allocation, so the caller must keep it alive until
// unmap(). Worker::MapDevice has already checked that the context supports `type`.
Napi::Value Mapping::SetupDevice(Worker* w, uint64_t address, size_t length, ucs_memory_type_t type) {
  ptr_ = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(address));
  len_ = length;
  kind_ = DEVICE;
  memType_ = type;
  Register(w, "mapDevice");
  return Env().Undefined();
}

void Mapping::DoUnmap() {
  if (!memh_) return;
  if ((kind_ == UCX_ALLOC || kind_ == FILE_MMAP) && !buf_.IsEmpty()) {
    // JS must not touch the memory once UCX frees it / we munmap it: detach the external ArrayBuffer
    // (every Buffer over it then reads as length 0) before releasing the memory.
    Napi::ArrayBuffer ab = buf_.Value().As<Napi::ArrayBuffer>();
    if (!ab.IsDetached()) ab.Detach();
  }
  if (worker_ && worker_->ctx()) ucp_mem_unmap(worker_->ctx(), memh_);
  memh_ = nullptr;
  if (kind_ == FILE_MMAP && ptr_) munmap(ptr_, len_);  // after ucp_mem_unmap: UCX no longer uses the range
  if (worker_) worker_->RemoveMapping(this);
  buf_.Reset();
  workerRef_.Reset();
  Unref();
}

Napi::Value Mapping::PackRkey(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Usable()) throw MakeError(env, "closed", UCS_OK, "mapping is unmapped");
  void* rb = nullptr; size_t rs = 0;
  ucs_status_t st = ucp_rkey_pack(worker_->ctx(), memh_, &rb, &rs);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_rkey_pack failed");
  Napi::Buffer<uint8_t> out = Napi::Buffer<uint8_t>::Copy(env, static_cast<uint8_t*>(rb), rs);
  ucp_rkey_buffer_release(rb);
  return out;
}

Napi::Value Mapping::Unmap(const Napi::CallbackInfo& info) {
  if (memh_ && !unmapRequested_) {
    unmapRequested_ = true;
    if (inflight_ == 0) DoUnmap();   // otherwise deferred until in-flight ops complete
  }
  return info.Env().Undefined();
}

Napi::Function Mapping::Init(Napi::Env env) {
  return DefineClass(env, "Mapping", {
    InstanceMethod<&Mapping::PackRkey>("packRkey"),
    InstanceMethod<&Mapping::Unmap>("unmap"),
    InstanceAccessor<&Mapping::Address>("address"),
    InstanceAccessor<&Mapping::Length>("length"),
    InstanceAccessor<&Mapping::Mapped>("mapped"),
    InstanceAccessor<&Mapping::BufferJs>("buffer"),
    InstanceAccessor<&Mapping::MemoryTypeJs>("memoryType"),
  });
}
Mapping::Mapping(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Mapping>(info) {}

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

// =============================================================================================
// Endpoint
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
  ucp_request_param_t rp = SendParams(op, UCP_OP_ATTR_FIELD_MEMH);
  rp.memh = m->memh();
  void* local = m->ptr() + off;
  ucs_status_ptr_t r = kind == Op::GET ? ucp_get_nbx(ep_, local, len, raddr, rk->rkey(), &rp)
                                       : ucp_put_nbx(ep_, local, len, raddr, rk->rkey(), &rp);
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

// =============================================================================================
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

Napi::Function Listener::Init(Napi::Env env) {
  return DefineClass(env, "Listener", {
    InstanceMethod<&Listener::Close>("close"),
    InstanceAccessor<&Listener::Port>("port"),
  });
}

// =============================================================================================
// Whether UCX, configured from the environment, can register CUDA memory: a short-lived context is
// created once per process and its memory types queried (a Worker's own context may differ if its
// config excludes transports; UcxWorker.cudaSupported reports that one).
bool ProbeCudaSupport() {
  static int cached = -1;
  if (cached >= 0) return cached == 1;
  cached = 0;
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  ucp_context_h ctx = nullptr;
  ucs_status_t st = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (st != UCS_OK) return false;
  cached = (ContextMemoryTypes(ctx) & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) ? 1 : 0;
  ucp_cleanup(ctx);
  return cached == 1;
}

Napi::Value ModuleInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  unsigned maj = 0, min = 0, rel = 0;
  ucp_get_version(&maj, &min, &rel);
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", Napi::Boolean::New(env, true));
  o.Set("version", Napi::String::New(env, std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel)));
  o.Set("cudaSupported", Napi::Boolean::New(env, ProbeCudaSupport()));
  o.Set("reason", env.Null());
  return o;
}

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
  return exports;
}

}  // namespace

NODE_API_MODULE(ucx, InitModule)
