// Shared by every source of the addon: the UCX / N-API includes, forward declarations of the five
// classes, the per-env constructor table and small argument helpers (no UCX state here).
#pragma once

#include <napi.h>
#include <uv.h>
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace robustrl::ucx {

class Worker;
class Endpoint;
class Mapping;
class RemoteKey;
class Listener;

// The classes' constructors, set as the env's instance data by InitModule (module.cc): natives create
// JS-visible objects (an Endpoint for an accepted connection, a Mapping for map()) through them.
struct Constructors {
  Napi::FunctionReference worker, endpoint, mapping, rkey, listener;
};

inline uint64_t ToU64(const Napi::Value& v, const char* what) {
  if (v.IsBigInt()) {
    bool lossless = true;
    uint64_t r = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throw Napi::RangeError::New(v.Env(), std::string(what) + " out of range");
    return r;
  }
  if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (d < 0 || d > 9007199254740991.0 || d != static_cast<double>(static_cast<uint64_t>(d)))
      throw Napi::RangeError::New(v.Env(), std::string(what) + " must be a non-negative integer");
    return static_cast<uint64_t>(d);
  }
  throw Napi::TypeError::New(v.Env(), std::string(what) + " must be a bigint or number");
}

inline bool ParseSockaddr(const std::string& host, int port, sockaddr_in* sa) {
  std::memset(sa, 0, sizeof(*sa));
  sa->sin_family = AF_INET;
  sa->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &sa->sin_addr) == 1;
}

// Gets (ptr, len) of a Buffer / TypedArray / DataView / ArrayBuffer; false if detached / not a buffer.
inline bool BufferSpan(const Napi::Value& v, uint8_t** ptr, size_t* len, bool* detached) {
  *detached = false;
  if (v.IsArrayBuffer()) {
    auto ab = v.As<Napi::ArrayBuffer>();
    if (ab.IsDetached()) { *detached = true; return false; }
    *ptr = static_cast<uint8_t*>(ab.Data());
    *len = ab.ByteLength();
    return true;
  }
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    if (ta.ArrayBuffer().IsDetached()) { *detached = true; return false; }
    *ptr = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    *len = ta.ByteLength();
    return true;
  }
  if (v.IsDataView()) {
    auto dv = v.As<Napi::DataView>();
    if (dv.ArrayBuffer().IsDetached()) { *detached = true; return false; }
    *ptr = static_cast<uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset();
    *len = dv.ByteLength();
    return true;
  }
  return false;
}

}  // namespace robustrl::ucx
