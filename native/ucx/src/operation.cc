// Operation completion: posting results of nbx calls, the UCX completion callbacks (which only queue),
// settling the JS promise with the right error kind, and freeing an op once UCX and JS are both done.
#include "operation.h"

#include "endpoint.h"
#include "errors.h"
#include "mapping.h"
#include "worker.h"

namespace robustrl::ucx {

ucp_request_param_t SendParams(Op* op, uint32_t extraFields) {
  ucp_request_param_t rp;
  std::memset(&rp, 0, sizeof(rp));
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | extraFields;
  rp.cb.send = &Worker::SendCb;
  rp.user_data = op;
  op->ucxDone = false;
  return rp;
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
      case Op::GET:
      case Op::PUT:
        if (op->describe) {
          op->deferred.Resolve(Napi::String::New(env, op->protocol));
          break;
        }
        op->deferred.Resolve(env.Undefined());
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

}  // namespace robustrl::ucx
