// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1), so that the addon builds and loads on
// machines without CUDA and says why device memory is unavailable instead of failing to load.
// Only what robustrl needs: a device's primary context (UCX's cuda transports need a current context
// before the worker is created, gpu-offline-build.md rule 2), CUDA IPC import (a framework's tensors
// handed to the agent, opened here and registered for RMA), small copies between device and host
// (sampled checksums, tests) and allocations for tests. The declarations below are the driver's stable
// ABI (cuda.h of CUDA 12/13: the `_v2` entry points the header's macros name). No UCX here: the stub
// build includes this file too.
#pragma once

#include <napi.h>

#include <cstdint>
#include <string>

namespace robustrl::cuda {

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUdeviceptr = unsigned long long;
constexpr size_t kIpcHandleBytes = 64;  // CU_IPC_HANDLE_SIZE
struct CUipcMemHandle {
  char reserved[kIpcHandleBytes];
};

// Where a pointer's memory lives, as the driver says (CU_POINTER_ATTRIBUTE_MEMORY_TYPE).
enum class MemoryKind { UNKNOWN, HOST, DEVICE, MANAGED };

struct Driver {
  bool loaded = false;
  std::string why;   // why not loaded
  std::string path;  // the library opened
  CUresult (*cuInit)(unsigned int) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t) = nullptr;                 // cuMemAlloc_v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                           // cuMemFree_v2
  CUresult (*cuMemGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;  // _v2
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t) = nullptr;         // cuMemcpyDtoH_v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t) = nullptr;  // cuMemcpyHtoD_v2
  CUresult (*cuMemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t) = nullptr;  // cuMemcpyDtoD_v2
  CUresult (*cuIpcGetMemHandle)(CUipcMemHandle*, CUdeviceptr) = nullptr;
  CUresult (*cuIpcOpenMemHandle)(CUdeviceptr*, CUipcMemHandle, unsigned int) = nullptr;  // _v2
  CUresult (*cuIpcCloseMemHandle)(CUdeviceptr) = nullptr;
  CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
};

// Loads the driver once per process: the path ConfigureDriverPath gave, else ROBUSTRL_CUDA_DRIVER,
// else libcuda.so.1. Never throws.
const Driver& LoadDriver();
// Before the first LoadDriver (later: no effect; returns whether it took effect).
bool ConfigureDriverPath(const std::string& path);

// "CUDA_ERROR_INVALID_VALUE: invalid argument" (or the number when the driver cannot name it).
std::string ErrorText(CUresult r);

// Throws a JS Error { code: 'CUDA_UNAVAILABLE' | <the CUresult's name>, cudaResult } for `what`.
[[noreturn]] void Throw(Napi::Env env, const std::string& what, CUresult r);
[[noreturn]] void ThrowUnavailable(Napi::Env env, const std::string& what);

// cuInit, then the primary context of `device` retained (kept for the process's life) and made current
// on the calling thread (the Node main thread, where UCX progresses). Throws.
CUcontext UseDevice(Napi::Env env, int device);
// Whether a context is current on this thread (UCX created after it sees CUDA memory as such).
bool HasCurrentContext();

// Imports a CUDA IPC handle exported by another process (cudaIpcGetMemHandle / torch's _share_cuda_),
// in `device`'s primary context. A handle already open in this process is not opened again (the driver
// refuses that): its base is shared and counted; ReleaseIpc closes it when the last user lets go.
CUdeviceptr OpenIpc(Napi::Env env, const uint8_t* handle, int device, size_t* allocationBytes);
void ReleaseIpc(CUdeviceptr base);

// A new allocation of `length` bytes on `device` holding a copy of [src, src + length) (device to device,
// synchronous). Throws, allocating nothing, when the driver refuses. FreeDevice releases it (never throws).
CUdeviceptr CopyToOwn(Napi::Env env, int device, CUdeviceptr src, size_t length);
void FreeDevice(CUdeviceptr address);

MemoryKind KindOf(CUdeviceptr address);

}  // namespace robustrl::cuda
