// Listener (see listener.h).
#include "listener.h"

#include "errors.h"

namespace robustrl::ucx {

Napi::Function Listener::Init(Napi::Env env) {
  return DefineClass(env, "Listener", {
    InstanceMethod<&Listener::Close>("close"),
    InstanceAccessor<&Listener::Port>("port"),
  });
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

}  // namespace robustrl::ucx
