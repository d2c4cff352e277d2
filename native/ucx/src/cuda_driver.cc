// The CUDA driver loaded at run time (see cuda_driver.h).
#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace robustrl::cuda {

namespace {

constexpr CUresult CUDA_SUCCESS = 0;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr unsigned CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_UNIFIED = 4;
constexpr unsigned CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1;

template <typename F>
bool Resolve(void* lib, const char* name, F* out, std::string* missing) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  if (!*out) {
    if (!missing->empty()) *missing += ", ";
    *missing += name;
  }
  return *out != nullptr;
}

std::string configuredPath;
bool driverLoaded = false;

Driver Load() {
  Driver d;
  driverLoaded = true;
  const char* override = std::getenv("ROBUSTRL_CUDA_DRIVER");
  d.path = !configuredPath.empty() ? configuredPath : override && *override ? override : "libcuda.so.1";
  void* lib = dlopen(d.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    d.why = "the CUDA driver (" + d.path + ") could not be loaded: " + (e ? e : "unknown error") +
            " (no NVIDIA driver on this machine, or not visible to this process)";
    return d;
  }
  std::string missing;
  Resolve(lib, "cuInit", &d.cuInit, &missing);
  Resolve(lib, "cuDriverGetVersion", &d.cuDriverGetVersion, &missing);
  Resolve(lib, "cuDeviceGetCount", &d.cuDeviceGetCount, &missing);
  Resolve(lib, "cuDeviceGet", &d.cuDeviceGet, &missing);
  Resolve(lib, "cuDeviceGetName", &d.cuDeviceGetName, &missing);
  Resolve(lib, "cuDeviceGetPCIBusId", &d.cuDeviceGetPCIBusId, &missing);
  Resolve(lib, "cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain, &missing);
  Resolve(lib, "cuCtxSetCurrent", &d.cuCtxSetCurrent, &missing);
  Resolve(lib, "cuCtxGetCurrent", &d.cuCtxGetCurrent, &missing);
  Resolve(lib, "cuCtxSynchronize", &d.cuCtxSynchronize, &missing);
  Resolve(lib, "cuMemAlloc_v2", &d.cuMemAlloc, &missing);
  Resolve(lib, "cuMemFree_v2", &d.cuMemFree, &missing);
  Resolve(lib, "cuMemGetAddressRange_v2", &d.cuMemGetAddressRange, &missing);
  Resolve(lib, "cuMemcpyDtoH_v2", &d.cuMemcpyDtoH, &missing);
  Resolve(lib, "cuMemcpyHtoD_v2", &d.cuMemcpyHtoD, &missing);
  Resolve(lib, "cuMemcpyDtoD_v2", &d.cuMemcpyDtoD, &missing);
  Resolve(lib, "cuIpcGetMemHandle", &d.cuIpcGetMemHandle, &missing);
  Resolve(lib, "cuIpcOpenMemHandle_v2", &d.cuIpcOpenMemHandle, &missing);
  Resolve(lib, "cuIpcCloseMemHandle", &d.cuIpcCloseMemHandle, &missing);
  Resolve(lib, "cuPointerGetAttribute", &d.cuPointerGetAttribute, &missing);
  Resolve(lib, "cuGetErrorName", &d.cuGetErrorName, &missing);
  Resolve(lib, "cuGetErrorString", &d.cuGetErrorString, &missing);
  if (!missing.empty()) {
    d.why = "the CUDA driver " + d.path + " lacks " + missing + " (a driver older than CUDA 11?)";
    dlclose(lib);
    return d;
  }
  d.loaded = true;  // the library stays open for the process's life
  return d;
}

std::once_flag initOnce;
CUresult initResult = CUDA_SUCCESS;
std::map<int, CUcontext> primary;  // devices whose primary context this process retained

struct OpenHandle {
  CUdeviceptr base;
  size_t bytes;
  int device;
  int users;
};
std::unordered_map<std::string, OpenHandle> openByHandle;
std::unordered_map<CUdeviceptr, std::string> handleOfBase;

Napi::Error NewError(Napi::Env env, const std::string& message, const char* code, CUresult r) {
  Napi::Error e = Napi::Error::New(env, message);
  e.Set("code", Napi::String::New(env, code));
  e.Set("cudaResult", Napi::Number::New(env, r));
  e.Set("ucxKind", Napi::String::New(env, r == CUDA_SUCCESS ? "unavailable" : "cuda"));
  return e;
}

}  // namespace

const Driver& LoadDriver() {
  static const Driver driver = Load();
  return driver;
}

bool ConfigureDriverPath(const std::string& path) {
  if (driverLoaded) return false;
  configuredPath = path;
  return true;
}

std::string ErrorText(CUresult r) {
  const Driver& d = LoadDriver();
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.loaded) {
    d.cuGetErrorName(r, &name);
    d.cuGetErrorString(r, &text);
  }
  std::string s = name ? name : "CUDA error " + std::to_string(r);
  if (text) s += std::string(": ") + text;
  return s;
}

void Throw(Napi::Env env, const std::string& what, CUresult r) {
  const Driver& d = LoadDriver();
  const char* name = nullptr;
  if (d.loaded) d.cuGetErrorName(r, &name);
  throw NewError(env, what + " failed: " + ErrorText(r), name ? name : "CUDA_ERROR", r);
}

void ThrowUnavailable(Napi::Env env, const std::string& what) {
  throw NewError(env, what + ": " + LoadDriver().why, "CUDA_UNAVAILABLE", CUDA_SUCCESS);
}

CUcontext UseDevice(Napi::Env env, int device) {
  const Driver& d = LoadDriver();
  if (!d.loaded) ThrowUnavailable(env, "CUDA device " + std::to_string(device));
  std::call_once(initOnce, [&] { initResult = d.cuInit(0); });
  if (initResult != CUDA_SUCCESS) Throw(env, "cuInit", initResult);
  auto it = primary.find(device);
  if (it == primary.end()) {
    int count = 0;
    CUresult r = d.cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS) Throw(env, "cuDeviceGetCount", r);
    if (device < 0 || device >= count)
      throw NewError(env, "CUDA device " + std::to_string(device) + " does not exist (this process sees " + std::to_string(count) + ")",
                     "CUDA_ERROR_INVALID_DEVICE", 101);
    CUdevice dev = 0;
    r = d.cuDeviceGet(&dev, device);
    if (r != CUDA_SUCCESS) Throw(env, "cuDeviceGet(" + std::to_string(device) + ")", r);
    CUcontext ctx = nullptr;
    r = d.cuDevicePrimaryCtxRetain(&ctx, dev);
    if (r != CUDA_SUCCESS) Throw(env, "cuDevicePrimaryCtxRetain(" + std::to_string(device) + ")", r);
    it = primary.emplace(device, ctx).first;
  }
  CUresult r = d.cuCtxSetCurrent(it->second);
  if (r != CUDA_SUCCESS) Throw(env, "cuCtxSetCurrent", r);
  return it->second;
}

bool HasCurrentContext() {
  // Nothing in this process has used CUDA through the addon yet: no context of ours, and asking must
  // not load the driver (that would fix its path before a caller could choose it: ConfigureDriverPath).
  if (!driverLoaded) return false;
  const Driver& d = LoadDriver();
  if (!d.loaded) return false;
  CUcontext ctx = nullptr;
  return d.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr;
}

CUdeviceptr OpenIpc(Napi::Env env, const uint8_t* handle, int device, size_t* allocationBytes) {
  const Driver& d = LoadDriver();
  UseDevice(env, device);
  std::string key(reinterpret_cast<const char*>(handle), kIpcHandleBytes);
  auto it = openByHandle.find(key);
  if (it != openByHandle.end()) {
    it->second.users++;
    *allocationBytes = it->second.bytes;
    return it->second.base;
  }
  CUipcMemHandle h;
  std::memcpy(h.reserved, handle, kIpcHandleBytes);
  CUdeviceptr base = 0;
  CUresult r = d.cuIpcOpenMemHandle(&base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (r != CUDA_SUCCESS)
    Throw(env, "cuIpcOpenMemHandle on device " + std::to_string(device) +
                   " (the exporting process must keep the allocation alive; a handle cannot be opened in the process that exported it)",
          r);
  CUdeviceptr rangeBase = 0;
  size_t bytes = 0;
  r = d.cuMemGetAddressRange(&rangeBase, &bytes, base);
  if (r != CUDA_SUCCESS) {
    d.cuIpcCloseMemHandle(base);
    Throw(env, "cuMemGetAddressRange of an imported IPC allocation", r);
  }
  openByHandle.emplace(key, OpenHandle{base, bytes, device, 1});
  handleOfBase.emplace(base, key);
  *allocationBytes = bytes;
  return base;
}

void ReleaseIpc(CUdeviceptr base) {
  auto k = handleOfBase.find(base);
  if (k == handleOfBase.end()) return;
  auto it = openByHandle.find(k->second);
  if (it != openByHandle.end() && --it->second.users > 0) return;
  const Driver& d = LoadDriver();
  if (it != openByHandle.end()) {
    auto ctx = primary.find(it->second.device);
    if (ctx != primary.end()) d.cuCtxSetCurrent(ctx->second);
    d.cuIpcCloseMemHandle(base);
    openByHandle.erase(it);
  }
  handleOfBase.erase(k);
}

CUdeviceptr CopyToOwn(Napi::Env env, int device, CUdeviceptr src, size_t length) {
  const Driver& d = LoadDriver();
  UseDevice(env, device);
  CUdeviceptr own = 0;
  CUresult r = d.cuMemAlloc(&own, length);
  if (r != CUDA_SUCCESS) Throw(env, "cuMemAlloc(" + std::to_string(length) + " bytes on device " + std::to_string(device) + ") for a copy of an imported range", r);
  r = d.cuMemcpyDtoD(own, src, length);
  if (r == CUDA_SUCCESS) r = d.cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    d.cuMemFree(own);
    Throw(env, "cuMemcpyDtoD(" + std::to_string(length) + " bytes) of an imported range", r);
  }
  return own;
}

void FreeDevice(CUdeviceptr address) {
  const Driver& d = LoadDriver();
  if (d.loaded && address) d.cuMemFree(address);
}

MemoryKind KindOf(CUdeviceptr address) {
  const Driver& d = LoadDriver();
  if (!d.loaded) return MemoryKind::UNKNOWN;
  unsigned type = 0;
  if (d.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, address) != CUDA_SUCCESS) return MemoryKind::UNKNOWN;
  switch (type) {
    case CU_MEMORYTYPE_HOST: return MemoryKind::HOST;
    case CU_MEMORYTYPE_DEVICE: return MemoryKind::DEVICE;
    case CU_MEMORYTYPE_UNIFIED: return MemoryKind::MANAGED;
    default: return MemoryKind::UNKNOWN;
  }
}

}  // namespace robustrl::cuda
