// Worker (see worker.h): the JS methods that map memory regions for RMA — map (a Buffer), mapAlloc,
// mapFile, mapDevice and mapIpc (CUDA) — and cudaSupported.
#include "worker.h"

#include "cuda_driver.h"

#include <limits>

#include "context.h"
#include "errors.h"
#include "mapping.h"
#include "worker_open.h"

namespace robustrl::ucx {

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

}  // namespace robustrl::ucx
