// JS errors of the addon (see errors.h).
#include "errors.h"

#include <cerrno>

namespace robustrl::ucx {

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
static const char* ErrnoName(int err) {
  switch (err) {
#define E(x) case x: return #x;
    E(ENOENT) E(EACCES) E(EPERM) E(EISDIR) E(ENOTDIR) E(ENOSPC) E(ENOMEM) E(EINVAL) E(EFBIG) E(EMFILE)
    E(ENFILE) E(ENAMETOOLONG) E(ELOOP) E(EROFS) E(ENODEV) E(ETXTBSY) E(EOVERFLOW) E(EEXIST) E(EBUSY)
    E(EFAULT) E(EBADF) E(EIO) E(EAGAIN) E(ENXIO) E(EINTR) E(EDQUOT)
#undef E
    default: return nullptr;
  }
}

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

}  // namespace robustrl::ucx
