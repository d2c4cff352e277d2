// Worker (see worker.h): recvTag, the worker's tagged receive (sends are per endpoint, endpoint.cc).
#include "worker.h"

#include "errors.h"

namespace robustrl::ucx {

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

}  // namespace robustrl::ucx
