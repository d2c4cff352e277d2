// Worker (see worker.h): the JS methods that create endpoints and listeners — listen, connect (sockaddr),
// address / connectAddress (worker address) — and NewEndpoint / StartConnect, which they share.
#include "worker.h"

#include "endpoint.h"
#include "errors.h"
#include "listener.h"
#include "worker_open.h"

namespace robustrl::ucx {

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

}  // namespace robustrl::ucx
