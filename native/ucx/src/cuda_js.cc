// The CUDA functions of the addon (facade: lib/cuda.ts, `cuda`): what the driver sees, a device's
// context, CUDA IPC export for tests and tools, and copies between device and host memory. Importing a
// handle for RMA is Worker.mapIpc (worker.cc), which needs UCX.
#include "cuda_driver.h"
#include "gpu_exports.h"

namespace robustrl {

namespace nvml {
Napi::Value Sample(const Napi::CallbackInfo& info);
}

namespace {

using namespace robustrl::cuda;

uint64_t Address(const Napi::Value& v, const char* what) {
  bool lossless = true;
  if (v.IsBigInt()) {
    uint64_t a = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (lossless && a != 0) return a;
  }
  throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a non-zero bigint device address");
}

int Device(const Napi::Value& v) {
  if (!v.IsNumber()) throw Napi::TypeError::New(v.Env(), "device must be a CUDA device ordinal");
  double d = v.As<Napi::Number>().DoubleValue();
  if (d < 0 || d != static_cast<int>(d)) throw Napi::RangeError::New(v.Env(), "device must be a non-negative integer");
  return static_cast<int>(d);
}

const Driver& Require(Napi::Env env, const char* what) {
  const Driver& d = LoadDriver();
  if (!d.loaded) ThrowUnavailable(env, what);
  return d;
}

// cudaInfo(): never throws. cuInit is called (cheap; no context is created).
Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = LoadDriver();
  Napi::Object o = Napi::Object::New(env);
  o.Set("driverPath", Napi::String::New(env, d.path));
  Napi::Array devices = Napi::Array::New(env);
  o.Set("devices", devices);
  o.Set("driverVersion", env.Null());
  if (!d.loaded) {
    o.Set("available", Napi::Boolean::New(env, false));
    o.Set("reason", Napi::String::New(env, d.why));
    return o;
  }
  CUresult r = d.cuInit(0);
  int version = 0, count = 0;
  if (r == 0) r = d.cuDriverGetVersion(&version);
  if (r == 0) r = d.cuDeviceGetCount(&count);
  if (r != 0) {
    o.Set("available", Napi::Boolean::New(env, false));
    o.Set("reason", Napi::String::New(env, "the CUDA driver loaded but cannot be used: " + ErrorText(r)));
    return o;
  }
  o.Set("driverVersion", Napi::Number::New(env, version));
  for (int i = 0; i < count; i++) {
    CUdevice dev = 0;
    char name[256] = {0}, bus[64] = {0};
    Napi::Object e = Napi::Object::New(env);
    e.Set("index", Napi::Number::New(env, i));
    if (d.cuDeviceGet(&dev, i) == 0) {
      if (d.cuDeviceGetName(name, sizeof(name), dev) == 0) e.Set("name", Napi::String::New(env, name));
      if (d.cuDeviceGetPCIBusId(bus, sizeof(bus), dev) == 0) e.Set("pciBusId", Napi::String::New(env, bus));
    }
    devices.Set(static_cast<uint32_t>(i), e);
  }
  o.Set("available", Napi::Boolean::New(env, count > 0));
  o.Set("reason", count > 0 ? env.Null() : Napi::String::New(env, "the CUDA driver sees no device").As<Napi::Value>());
  return o;
}

// cudaConfigure({ driverPath }): which library LoadDriver opens, before the first CUDA call.
Napi::Value Configure(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info[0].IsObject()) {
    Napi::Value p = info[0].As<Napi::Object>().Get("driverPath");
    if (p.IsString()) ConfigureDriverPath(p.As<Napi::String>().Utf8Value());
  }
  return env.Undefined();
}

Napi::Value UseDeviceJs(const Napi::CallbackInfo& info) {
  UseDevice(info.Env(), Device(info[0]));
  return info.Env().Undefined();
}

Napi::Value HasContextJs(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), HasCurrentContext()); }

Napi::Value Alloc(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaAlloc");
  int device = Device(info[0]);
  if (!info[1].IsNumber() || info[1].As<Napi::Number>().DoubleValue() < 1) throw Napi::RangeError::New(env, "cudaAlloc: length must be positive");
  size_t len = static_cast<size_t>(info[1].As<Napi::Number>().DoubleValue());
  UseDevice(env, device);
  CUdeviceptr p = 0;
  CUresult r = d.cuMemAlloc(&p, len);
  if (r != 0) Throw(env, "cuMemAlloc(" + std::to_string(len) + " bytes on device " + std::to_string(device) + ")", r);
  return Napi::BigInt::New(env, static_cast<uint64_t>(p));
}

Napi::Value Free(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaFree");
  CUresult r = d.cuMemFree(Address(info[0], "address"));
  if (r != 0) Throw(env, "cuMemFree", r);
  return env.Undefined();
}

// cudaIpcHandle(address) -> { handle: Buffer(64), offset, allocationBytes }: the handle covers the whole
// allocation that holds `address` (as cudaIpcGetMemHandle's does); offset is where `address` lies in it.
Napi::Value IpcHandle(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaIpcHandle");
  CUdeviceptr p = Address(info[0], "address");
  CUdeviceptr base = 0;
  size_t bytes = 0;
  CUresult r = d.cuMemGetAddressRange(&base, &bytes, p);
  if (r != 0) Throw(env, "cuMemGetAddressRange", r);
  CUipcMemHandle h;
  r = d.cuIpcGetMemHandle(&h, base);
  if (r != 0) Throw(env, "cuIpcGetMemHandle", r);
  Napi::Object o = Napi::Object::New(env);
  o.Set("handle", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<uint8_t*>(h.reserved), kIpcHandleBytes));
  o.Set("offset", Napi::Number::New(env, static_cast<double>(p - base)));
  o.Set("allocationBytes", Napi::Number::New(env, static_cast<double>(bytes)));
  return o;
}

bool HostSpan(const Napi::Value& v, uint8_t** ptr, size_t* len) {
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    if (ta.ArrayBuffer().IsDetached()) return false;
    *ptr = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    *len = ta.ByteLength();
    return true;
  }
  return false;
}

// cudaCopyToHost(address, dst): dst.length bytes from device memory at address (synchronous).
Napi::Value CopyToHost(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaCopyToHost");
  CUdeviceptr src = Address(info[0], "address");
  uint8_t* p; size_t n;
  if (!HostSpan(info[1], &p, &n)) throw Napi::TypeError::New(env, "cudaCopyToHost: dst must be a Buffer or TypedArray");
  if (n == 0) return env.Undefined();
  CUresult r = d.cuMemcpyDtoH(p, src, n);
  if (r != 0) Throw(env, "cuMemcpyDtoH(" + std::to_string(n) + " bytes)", r);
  return env.Undefined();
}

// cudaCopyFromHost(address, src): src into device memory at address (synchronous).
Napi::Value CopyFromHost(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaCopyFromHost");
  CUdeviceptr dst = Address(info[0], "address");
  uint8_t* p; size_t n;
  if (!HostSpan(info[1], &p, &n)) throw Napi::TypeError::New(env, "cudaCopyFromHost: src must be a Buffer or TypedArray");
  if (n == 0) return env.Undefined();
  CUresult r = d.cuMemcpyHtoD(dst, p, n);
  if (r != 0) Throw(env, "cuMemcpyHtoD(" + std::to_string(n) + " bytes)", r);
  return env.Undefined();
}

// cudaGather(address, offsets: Float64Array, length, dst): dst[i*length, +length) = device[address + offsets[i],
// +length) for every i, in one call (a sampled checksum reads hundreds of small ranges of a bucket).
Napi::Value Gather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaGather");
  CUdeviceptr base = Address(info[0], "address");
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
    throw Napi::TypeError::New(env, "cudaGather: offsets must be a Float64Array");
  Napi::Float64Array offsets = info[1].As<Napi::Float64Array>();
  if (!info[2].IsNumber()) throw Napi::TypeError::New(env, "cudaGather: length must be a number");
  size_t len = static_cast<size_t>(info[2].As<Napi::Number>().DoubleValue());
  uint8_t* p; size_t n;
  if (!HostSpan(info[3], &p, &n) || n < offsets.ElementLength() * len)
    throw Napi::RangeError::New(env, "cudaGather: dst must hold offsets.length * length bytes");
  for (size_t i = 0; i < offsets.ElementLength(); i++) {
    CUresult r = d.cuMemcpyDtoH(p + i * len, base + static_cast<CUdeviceptr>(offsets[i]), len);
    if (r != 0) Throw(env, "cuMemcpyDtoH (sample " + std::to_string(i) + ")", r);
  }
  return env.Undefined();
}

// cudaCopy(dst, src, length): device to device (synchronous) — the baseline a pull is compared with.
Napi::Value CopyDevice(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Driver& d = Require(env, "cudaCopy");
  CUdeviceptr dst = Address(info[0], "dst"), src = Address(info[1], "src");
  if (!info[2].IsNumber()) throw Napi::TypeError::New(env, "cudaCopy: length must be a number");
  size_t n = static_cast<size_t>(info[2].As<Napi::Number>().DoubleValue());
  CUresult r = d.cuMemcpyDtoD(dst, src, n);
  if (r == 0) r = d.cuCtxSynchronize();
  if (r != 0) Throw(env, "cuMemcpyDtoD(" + std::to_string(n) + " bytes)", r);
  return env.Undefined();
}

Napi::Value MemoryTypeJs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  switch (KindOf(Address(info[0], "address"))) {
    case MemoryKind::HOST: return Napi::String::New(env, "host");
    case MemoryKind::DEVICE: return Napi::String::New(env, "cuda");
    case MemoryKind::MANAGED: return Napi::String::New(env, "cuda-managed");
    default: return env.Null();
  }
}

}  // namespace

void RegisterGpuExports(Napi::Env env, Napi::Object exports) {
  exports.Set("cudaConfigure", Napi::Function::New(env, Configure, "cudaConfigure"));
  exports.Set("cudaInfo", Napi::Function::New(env, Info, "cudaInfo"));
  exports.Set("cudaUseDevice", Napi::Function::New(env, UseDeviceJs, "cudaUseDevice"));
  exports.Set("cudaHasContext", Napi::Function::New(env, HasContextJs, "cudaHasContext"));
  exports.Set("cudaAlloc", Napi::Function::New(env, Alloc, "cudaAlloc"));
  exports.Set("cudaFree", Napi::Function::New(env, Free, "cudaFree"));
  exports.Set("cudaIpcHandle", Napi::Function::New(env, IpcHandle, "cudaIpcHandle"));
  exports.Set("cudaCopyToHost", Napi::Function::New(env, CopyToHost, "cudaCopyToHost"));
  exports.Set("cudaCopyFromHost", Napi::Function::New(env, CopyFromHost, "cudaCopyFromHost"));
  exports.Set("cudaCopy", Napi::Function::New(env, CopyDevice, "cudaCopy"));
  exports.Set("cudaGather", Napi::Function::New(env, Gather, "cudaGather"));
  exports.Set("cudaMemoryType", Napi::Function::New(env, MemoryTypeJs, "cudaMemoryType"));
  exports.Set("nvmlSample", Napi::Function::New(env, nvml::Sample, "nvmlSample"));
}

}  // namespace robustrl
