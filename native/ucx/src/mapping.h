// Mapping (MemoryRegion in the facade): memory registered with a worker's context (ucp_mem_map) for RMA.
#pragma once

#include "common.h"

namespace robustrl::ucx {

class Mapping : public Napi::ObjectWrap<Mapping> {
 public:
  static Napi::Function Init(Napi::Env env);
  explicit Mapping(const Napi::CallbackInfo& info);
  ~Mapping() override { DoUnmap(); }

  // What the registered memory is; decides what unmap() must release besides the memh.
  enum Kind {
    USER,       // map(): a JS Buffer/ArrayBuffer; kept referenced while mapped
    UCX_ALLOC,  // mapAlloc(): UCP_MEM_MAP_ALLOCATE; buf_ is an external ArrayBuffer over UCX's memory
    FILE_MMAP,  // mapFile(): our MAP_SHARED mmap of a file; buf_ is an external ArrayBuffer over it
    DEVICE,     // mapDevice(): device memory (CUDA); no host view, buf_ empty
    CUDA_IPC,   // mapIpc(): another process's device memory, opened from its CUDA IPC handle; closed on unmap
    CUDA_COPY,  // mapIpc(copy): our own device allocation holding a copy of the imported range; freed on unmap
  };

  // What peers may do with the region's rkey: read and write (UCX's default), or only read (GET) — the
  // registration asks for remote read access alone, which RDMA NICs enforce (a PUT is refused by the
  // hardware). Set before Setup*.
  void SetRemoteReadOnly(bool readOnly) { remoteReadOnly_ = readOnly; }
  // Set up by Worker::Map / MapAlloc / MapFile / MapDevice.
  Napi::Value Setup(Worker* w, Napi::Value buf);
  Napi::Value SetupAlloc(Worker* w, size_t length);
  Napi::Value SetupFile(Worker* w, const std::string& path, size_t length, bool create);
  Napi::Value SetupDevice(Worker* w, uint64_t address, size_t length, ucs_memory_type_t type);
  Napi::Value SetupIpc(Worker* w, const uint8_t* handle, uint64_t offset, size_t length, int device, bool copy);
  bool Usable() const { return memh_ != nullptr && !unmapRequested_; }
  bool CheckAlive() {  // detached ArrayBuffer = memory may be gone
    if (kind_ == DEVICE || kind_ == CUDA_IPC || kind_ == CUDA_COPY) return true;  // no JS object owns device memory; the caller (or the IPC handle) keeps it
    uint8_t* p; size_t l; bool det;
    Napi::Value v = buf_.Value();
    if (!BufferSpan(v, &p, &l, &det)) return false;
    return p == ptr_ && l >= len_;
  }
  uint8_t* ptr() const { return ptr_; }
  size_t len() const { return len_; }
  ucp_mem_h memh() const { return memh_; }
  void OpStarted() { inflight_++; }
  void OpDone() { if (--inflight_ == 0 && unmapRequested_) DoUnmap(); }
  void DoUnmap();

 private:
  Napi::Value PackRkey(const Napi::CallbackInfo& info);
  Napi::Value Unmap(const Napi::CallbackInfo& info);
  Napi::Value Address(const Napi::CallbackInfo& info) { return Napi::BigInt::New(info.Env(), static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr_))); }
  Napi::Value Length(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), static_cast<double>(len_)); }
  Napi::Value Mapped(const Napi::CallbackInfo& info) { return Napi::Boolean::New(info.Env(), Usable()); }
  Napi::Value BufferJs(const Napi::CallbackInfo& info) { return buf_.IsEmpty() ? info.Env().Null() : buf_.Value(); }
  Napi::Value AccessJs(const Napi::CallbackInfo& info) { return Napi::String::New(info.Env(), remoteReadOnly_ ? "remote-read" : "read-write"); }
  Napi::Value MemoryTypeJs(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), memType_ == UCS_MEMORY_TYPE_HOST ? "host" : ucs_memory_type_names[memType_]);
  }
  void Register(Worker* w, const char* what);  // ucp_mem_map(ptr_, len_, memType_) + pin; throws

  Worker* worker_ = nullptr;
  Napi::ObjectReference workerRef_;
  Napi::ObjectReference buf_;   // keeps the Buffer/ArrayBuffer alive while mapped
  uint8_t* ptr_ = nullptr;
  size_t len_ = 0;
  ucp_mem_h memh_ = nullptr;
  int inflight_ = 0;
  bool unmapRequested_ = false;
  Kind kind_ = USER;
  ucs_memory_type_t memType_ = UCS_MEMORY_TYPE_HOST;
  bool remoteReadOnly_ = false;
  uint64_t ipcBase_ = 0;  // CUDA_IPC: the opened allocation, released (cuda::ReleaseIpc) on unmap
  uint64_t ownDevice_ = 0;  // CUDA_COPY: our allocation, freed (cuda::FreeDevice) on unmap
  // The ucp_mem_map protection fields for remoteReadOnly_ (none: UCX's default, every access).
  void ApplyAccess(ucp_mem_map_params_t* mp) const {
    if (!remoteReadOnly_) return;
    mp->field_mask |= UCP_MEM_MAP_PARAM_FIELD_PROT;
    mp->prot = UCP_MEM_MAP_PROT_LOCAL_READ | UCP_MEM_MAP_PROT_LOCAL_WRITE | UCP_MEM_MAP_PROT_REMOTE_READ;
  }
};

}  // namespace robustrl::ucx
