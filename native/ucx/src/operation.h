// One JS-visible UCX operation (get, put, sendTag, recvTag, connect, flush, close): the promise it settles,
// the JS objects it keeps alive while UCX may touch their memory, and its UCX request. Ops are created by
// Worker / Endpoint methods and completed by the Worker (Posted, SendCb/RecvCb, Settle, MaybeFree:
// operation.cc), always on the Node main thread.
#pragma once

#include "common.h"

namespace robustrl::ucx {

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
  // GET/PUT asked to describe itself: the protocol UCX chose (ucp_request_query), resolved instead of undefined
  bool describe = false;
  std::string protocol;
  Op(Kind k, Worker* w, Napi::Env env) : kind(k), worker(w), deferred(Napi::Promise::Deferred::New(env)) {}
};

struct ConnRequest {
  Listener* listener;
  ucp_conn_request_h req;
};

// Parameters of a UCX operation that completes through Worker::SendCb (send, put, get, flush,
// close); marks the op as having a UCX request outstanding until the callback or Posted says so.
ucp_request_param_t SendParams(Op* op, uint32_t extraFields = 0);

}  // namespace robustrl::ucx
