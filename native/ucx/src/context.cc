// UCP contexts (see context.h).
#include "context.h"

#include "errors.h"

namespace robustrl::ucx {

ucp_context_h CreateContext(Napi::Env env, const Napi::Value& options) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) { MakeError(env, "ucx", st, "ucp_config_read failed").ThrowAsJavaScriptException(); return nullptr; }
  // Options: { config: { KEY: "value" } } → ucp_config_modify (keys without the UCX_ prefix).
  if (options.IsObject()) {
    Napi::Object opts = options.As<Napi::Object>();
    if (opts.Has("config") && opts.Get("config").IsObject()) {
      Napi::Object cfg = opts.Get("config").As<Napi::Object>();
      Napi::Array keys = cfg.GetPropertyNames();
      for (uint32_t i = 0; i < keys.Length(); i++) {
        std::string k = keys.Get(i).ToString().Utf8Value();
        std::string v = cfg.Get(k).ToString().Utf8Value();
        if (k.rfind("UCX_", 0) == 0) k = k.substr(4);
        st = ucp_config_modify(config, k.c_str(), v.c_str());
        if (st != UCS_OK) {
          ucp_config_release(config);
          MakeError(env, "ucx", st, "ucp_config_modify(" + k + "=" + v + ") failed").ThrowAsJavaScriptException();
          return nullptr;
        }
      }
    }
  }
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  ucp_context_h ctx = nullptr;
  st = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (st != UCS_OK) { MakeError(env, "ucx", st, "ucp_init failed").ThrowAsJavaScriptException(); return nullptr; }
  return ctx;
}

uint64_t ContextMemoryTypes(ucp_context_h ctx) {
  ucp_context_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ctx, &a) != UCS_OK) return UCS_BIT(UCS_MEMORY_TYPE_HOST);
  return a.memory_types;
}

// Whether UCX, configured from the environment, can register CUDA memory: a short-lived context is
// created once per process and its memory types queried (a Worker's own context may differ if its
// config excludes transports; UcxWorker.cudaSupported reports that one).
static bool ProbeCudaSupport() {
  static int cached = -1;
  if (cached >= 0) return cached == 1;
  cached = 0;
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA;
  ucp_context_h ctx = nullptr;
  ucs_status_t st = ucp_init(&params, config, &ctx);
  ucp_config_release(config);
  if (st != UCS_OK) return false;
  cached = (ContextMemoryTypes(ctx) & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) ? 1 : 0;
  ucp_cleanup(ctx);
  return cached == 1;
}

Napi::Value ModuleInfo(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  unsigned maj = 0, min = 0, rel = 0;
  ucp_get_version(&maj, &min, &rel);
  Napi::Object o = Napi::Object::New(env);
  o.Set("available", Napi::Boolean::New(env, true));
  o.Set("version", Napi::String::New(env, std::to_string(maj) + "." + std::to_string(min) + "." + std::to_string(rel)));
  o.Set("cudaSupported", Napi::Boolean::New(env, ProbeCudaSupport()));
  o.Set("reason", env.Null());
  return o;
}

}  // namespace robustrl::ucx
