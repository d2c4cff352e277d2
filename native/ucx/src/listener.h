// Listener: a ucp_listener on an IPv4 sockaddr; accepted connections become Endpoints (Worker::Deliver).
#pragma once

#include "common.h"
#include "worker.h"

namespace robustrl::ucx {

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

}  // namespace robustrl::ucx
