// GPU activity from NVML, loaded at run time (dlopen of libnvidia-ml.so.1): the addon builds and loads
// without it. Per device it reads
//  - utilization.gpu: the share of the last sample period in which any kernel ran. An NCCL kernel
//    spinning on a collective reads as 100%: it cannot tell a hung trainer from a busy one;
//  - on GPUs with GPM (Hopper and later), NVML_GPM_METRIC_ANY_TENSOR_UTIL between this call and the
//    previous one: the share of time tensor cores were busy, the same signal as DCGM's
//    DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (which the agent still prefers when a DCGM exporter is there).
// Exposed as nvmlSample() (module.cc and stub.cc both register it).
#include <dlfcn.h>
#include <napi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace robustrl::nvml {

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlGpmSample_t = struct nvmlGpmSample_st*;
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
// nvml.h (CUDA 12.9): nvmlGpmMetric_t / nvmlGpmMetricsGet_t / nvmlGpmSupport_t, version 1.
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
constexpr unsigned kGpmMetricMax = 210;  // NVML_GPM_METRIC_MAX: the driver only touches numMetrics entries
struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kGpmMetricMax];
};
struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};
constexpr unsigned NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5;
constexpr nvmlReturn_t NVML_SUCCESS = 0;

struct Nvml {
  bool loaded = false;
  std::string why;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*getCount)(unsigned int*) = nullptr;
  nvmlReturn_t (*getHandle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*getUuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*getUtilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  const char* (*errorString)(nvmlReturn_t) = nullptr;
  // GPM (driver 520+, Hopper+); absent: tensor activity is not available from NVML.
  nvmlReturn_t (*gpmSupport)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
  nvmlReturn_t (*gpmAlloc)(nvmlGpmSample_t*) = nullptr;
  nvmlReturn_t (*gpmFree)(nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpmGet)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpmMetrics)(nvmlGpmMetricsGet_t*) = nullptr;
};

Nvml Load() {
  Nvml n;
  const char* override = std::getenv("ROBUSTRL_NVML_LIBRARY");
  std::string path = override && *override ? override : "libnvidia-ml.so.1";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    n.why = "NVML (" + path + ") could not be loaded: " + (e ? e : "unknown error") + " (no NVIDIA driver on this machine?)";
    return n;
  }
  n.init = reinterpret_cast<decltype(n.init)>(dlsym(lib, "nvmlInit_v2"));
  n.getCount = reinterpret_cast<decltype(n.getCount)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  n.getHandle = reinterpret_cast<decltype(n.getHandle)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  n.getUuid = reinterpret_cast<decltype(n.getUuid)>(dlsym(lib, "nvmlDeviceGetUUID"));
  n.getUtilization = reinterpret_cast<decltype(n.getUtilization)>(dlsym(lib, "nvmlDeviceGetUtilizationRates"));
  n.errorString = reinterpret_cast<decltype(n.errorString)>(dlsym(lib, "nvmlErrorString"));
  n.gpmSupport = reinterpret_cast<decltype(n.gpmSupport)>(dlsym(lib, "nvmlGpmQueryDeviceSupport"));
  n.gpmAlloc = reinterpret_cast<decltype(n.gpmAlloc)>(dlsym(lib, "nvmlGpmSampleAlloc"));
  n.gpmFree = reinterpret_cast<decltype(n.gpmFree)>(dlsym(lib, "nvmlGpmSampleFree"));
  n.gpmGet = reinterpret_cast<decltype(n.gpmGet)>(dlsym(lib, "nvmlGpmSampleGet"));
  n.gpmMetrics = reinterpret_cast<decltype(n.gpmMetrics)>(dlsym(lib, "nvmlGpmMetricsGet"));
  if (!n.init || !n.getCount || !n.getHandle || !n.getUuid || !n.getUtilization || !n.errorString) {
    n.why = "NVML " + path + " lacks the v2 device API";
    return n;
  }
  if (!n.gpmSupport || !n.gpmAlloc || !n.gpmFree || !n.gpmGet || !n.gpmMetrics) n.gpmSupport = nullptr;
  nvmlReturn_t r = n.init();
  if (r != NVML_SUCCESS) {
    n.why = std::string("nvmlInit failed: ") + n.errorString(r);
    return n;
  }
  n.loaded = true;
  return n;
}

const Nvml& Get() {
  static const Nvml nvml = Load();
  return nvml;
}

// Per device: the GPM sample of the previous call (tensor activity is a rate between two samples).
struct DeviceGpm {
  bool checked = false;
  bool supported = false;
  nvmlGpmSample_t previous = nullptr;
};
std::vector<DeviceGpm> gpm;

// Tensor activity (0-100) since the previous call; -1 when not available (yet).
double TensorActive(const Nvml& n, nvmlDevice_t dev, unsigned index, std::string* why) {
  if (!n.gpmSupport) return (*why = "this NVML has no GPM (driver older than 520)"), -1;
  if (gpm.size() <= index) gpm.resize(index + 1);
  DeviceGpm& g = gpm[index];
  if (!g.checked) {
    g.checked = true;
    nvmlGpmSupport_t s{1, 0};
    g.supported = n.gpmSupport(dev, &s) == NVML_SUCCESS && s.isSupportedDevice != 0;
  }
  if (!g.supported) return (*why = "this GPU has no GPM (tensor activity needs Hopper or later)"), -1;
  nvmlGpmSample_t now = nullptr;
  if (n.gpmAlloc(&now) != NVML_SUCCESS) return (*why = "nvmlGpmSampleAlloc failed"), -1;
  nvmlReturn_t r = n.gpmGet(dev, now);
  if (r != NVML_SUCCESS) {
    n.gpmFree(now);
    return (*why = std::string("nvmlGpmSampleGet failed: ") + n.errorString(r)), -1;
  }
  double value = -1;
  if (g.previous) {
    auto* q = new nvmlGpmMetricsGet_t();
    q->version = 1;
    q->numMetrics = 1;
    q->sample1 = g.previous;
    q->sample2 = now;
    q->metrics[0].metricId = NVML_GPM_METRIC_ANY_TENSOR_UTIL;
    r = n.gpmMetrics(q);
    if (r == NVML_SUCCESS && q->metrics[0].nvmlReturn == NVML_SUCCESS) value = q->metrics[0].value;
    else *why = std::string("nvmlGpmMetricsGet failed: ") + n.errorString(r != NVML_SUCCESS ? r : q->metrics[0].nvmlReturn);
    delete q;
    n.gpmFree(g.previous);
  } else {
    *why = "first sample: tensor activity is a rate between two samples";
  }
  g.previous = now;
  return value;
}

}  // namespace

Napi::Value Sample(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const Nvml& n = Get();
  Napi::Object out = Napi::Object::New(env);
  out.Set("available", Napi::Boolean::New(env, n.loaded));
  out.Set("reason", n.loaded ? env.Null() : Napi::String::New(env, n.why).As<Napi::Value>());
  Napi::Array devices = Napi::Array::New(env);
  out.Set("devices", devices);
  if (!n.loaded) return out;
  unsigned count = 0;
  nvmlReturn_t r = n.getCount(&count);
  if (r != NVML_SUCCESS) {
    out.Set("available", Napi::Boolean::New(env, false));
    out.Set("reason", Napi::String::New(env, std::string("nvmlDeviceGetCount failed: ") + n.errorString(r)));
    return out;
  }
  for (unsigned i = 0; i < count; i++) {
    Napi::Object d = Napi::Object::New(env);
    d.Set("index", Napi::Number::New(env, i));
    nvmlDevice_t dev = nullptr;
    r = n.getHandle(i, &dev);
    if (r != NVML_SUCCESS) {
      d.Set("error", Napi::String::New(env, std::string("nvmlDeviceGetHandleByIndex failed: ") + n.errorString(r)));
      devices.Set(i, d);
      continue;
    }
    char uuid[96] = {0};
    if (n.getUuid(dev, uuid, sizeof(uuid)) == NVML_SUCCESS) d.Set("uuid", Napi::String::New(env, uuid));
    nvmlUtilization_t u{0, 0};
    r = n.getUtilization(dev, &u);
    if (r == NVML_SUCCESS) {
      d.Set("gpuUtilization", Napi::Number::New(env, u.gpu));
      d.Set("memoryUtilization", Napi::Number::New(env, u.memory));
    } else {
      d.Set("error", Napi::String::New(env, std::string("nvmlDeviceGetUtilizationRates failed: ") + n.errorString(r)));
    }
    std::string why;
    double tensor = TensorActive(n, dev, i, &why);
    d.Set("tensorActive", tensor < 0 ? env.Null() : Napi::Number::New(env, tensor).As<Napi::Value>());
    d.Set("tensorActiveReason", tensor < 0 ? Napi::String::New(env, why).As<Napi::Value>() : env.Null());
    devices.Set(i, d);
  }
  return out;
}

}  // namespace robustrl::nvml
