// Mapping (see mapping.h): map / mapAlloc / mapFile / mapDevice set-up, packRkey, unmap.
#include "mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "context.h"
#include "cuda_driver.h"
#include "errors.h"
#include "worker.h"

namespace robustrl::ucx {

Napi::Value Mapping::SetupAlloc(Worker* w, size_t length) {
  Napi::Env env = Env();
  ucp_mem_map_params_t mp;
  std::memset(&mp, 0, sizeof(mp));
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                  UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = nullptr;
  mp.length = length;
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  mp.memory_type = UCS_MEMORY_TYPE_HOST;
  ApplyAccess(&mp);
  ucs_status_t st = ucp_mem_map(w->ctx(), &mp, &memh_);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_mem_map(ALLOCATE) failed");
  ucp_mem_attr_t a;
  std::memset(&a, 0, sizeof(a));
  a.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  st = ucp_mem_query(memh_, &a);
  if (st != UCS_OK) { ucp_mem_unmap(w->ctx(), memh_); memh_ = nullptr; throw MakeError(env, "ucx", st, "ucp_mem_query failed"); }
  worker_ = w;
  ptr_ = static_cast<uint8_t*>(a.address);
  len_ = length;  // a.length may be rounded up
  kind_ = UCX_ALLOC;
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, ptr_, len_);  // external, no finalizer: UCX owns it
  buf_ = Napi::Persistent(ab.As<Napi::Object>());
  workerRef_ = Napi::Persistent(w->Value());
  Ref();
  w->AddMapping(this);
  return env.Undefined();
}

Napi::Value Mapping::Setup(Worker* w, Napi::Value buf) {
  Napi::Env env = Env();
  uint8_t* p; size_t l; bool det;
  if (!BufferSpan(buf, &p, &l, &det))
    throw Napi::TypeError::New(env, det ? "map: buffer is detached" : "map: expected Buffer, TypedArray, DataView or ArrayBuffer");
  if (l == 0) throw Napi::RangeError::New(env, "map: zero-length buffer");
  // Host memory only; device pointers go through Worker::MapDevice (UCS_MEMORY_TYPE_CUDA).
  ptr_ = p;
  len_ = l;
  memType_ = UCS_MEMORY_TYPE_HOST;
  Register(w, "map");
  buf_ = Napi::Persistent(buf.As<Napi::Object>());     // keep the JS memory alive while mapped
  return env.Undefined();
}

// Registers [ptr_, ptr_ + len_) of memType_ with the worker's context (no ALLOCATE: the memory belongs
// to someone else: a JS buffer, our own file mapping or the caller's device allocation) and pins the Mapping.
void Mapping::Register(Worker* w, const char* what) {
  Napi::Env env = Env();
  ucp_mem_map_params_t mp;
  std::memset(&mp, 0, sizeof(mp));
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
  mp.address = ptr_;
  mp.length = len_;
  mp.memory_type = memType_;
  ApplyAccess(&mp);
  ucs_status_t st = ucp_mem_map(w->ctx(), &mp, &memh_);
  if (st != UCS_OK) { memh_ = nullptr; throw MakeError(env, "ucx", st, std::string(what) + ": ucp_mem_map failed"); }
  worker_ = w;
  workerRef_ = Napi::Persistent(w->Value());
  Ref();  // pinned until unmap()/worker.close()
  w->AddMapping(this);
}

// mapFile(path, length, create): open + (create: O_CREAT, grow with ftruncate) + mmap(MAP_SHARED) +
// ucp_mem_map of the mapping. The fd is closed right after mmap (the mapping keeps the file alive).
// Typical use: a trainer writes a weight version to /dev/shm/<name>; the agent maps that file and
// serves GETs from it (or pulls into it) without copying it into a Node Buffer first.
Napi::Value Mapping::SetupFile(Worker* w, const std::string& path, size_t length, bool create) {
  Napi::Env env = Env();
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
  if (fd < 0) throw MakeErrnoError(env, errno, "open", path, "mapFile");
  struct stat sb;
  if (fstat(fd, &sb) != 0) { int e = errno; close(fd); throw MakeErrnoError(env, e, "fstat", path, "mapFile"); }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    throw Napi::TypeError::New(env, "mapFile: '" + path + "' is not a regular file");
  }
  uint64_t size = static_cast<uint64_t>(sb.st_size);
  if (size < length) {
    if (!create) {
      close(fd);
      throw Napi::RangeError::New(env, "mapFile: '" + path + "' is " + std::to_string(size) + " bytes, smaller than the requested length " +
                                           std::to_string(length) + " (pass { create: true } to grow it)");
    }
    // Grow only: shrinking a file that another process has mapped would make its accesses SIGBUS.
    // On tmpfs this reserves nothing; pages are allocated when first written.
    if (ftruncate(fd, static_cast<off_t>(length)) != 0) { int e = errno; close(fd); throw MakeErrnoError(env, e, "ftruncate", path, "mapFile"); }
  }
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int mmapErr = errno;
  close(fd);
  if (p == MAP_FAILED) throw MakeErrnoError(env, mmapErr, "mmap", path, "mapFile");
  ptr_ = static_cast<uint8_t*>(p);
  len_ = length;
  kind_ = FILE_MMAP;
  try {
    Register(w, "mapFile");
  } catch (...) {
    munmap(p, length);
    ptr_ = nullptr; len_ = 0;
    throw;
  }
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, ptr_, len_);  // external, no finalizer: DoUnmap munmaps
  buf_ = Napi::Persistent(ab.As<Napi::Object>());
  return env.Undefined();
}

// mapDevice(address, length, type): registers memory the caller allocated on a device (e.g. a CUDA
// tensor's data_ptr). UCX keeps no reference to an allocation, so the caller must keep it alive until
// unmap(). Worker::MapDevice has already checked that the context supports `type`.
Napi::Value Mapping::SetupDevice(Worker* w, uint64_t address, size_t length, ucs_memory_type_t type) {
  ptr_ = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(address));
  len_ = length;
  kind_ = DEVICE;
  memType_ = type;
  Register(w, "mapDevice");
  return Env().Undefined();
}

// mapIpc: opens the handle (or shares this process's earlier opening of it), checks that [offset,
// offset + length) lies inside the allocation, and registers it with the memory type the driver reports
// (device memory: UCS_MEMORY_TYPE_CUDA, which this worker's context must support).
//
// copy: instead of registering the imported range, copies it (device to device) into an allocation of our
// own, closes the handle and registers that. A peer can then GET it over cuda_ipc: UCX's cuda_ipc packs an
// rkey by exporting the memory again (cuIpcGetMemHandle), which the driver refuses for memory that was
// itself imported, and UCX falls back to software emulation over tcp (measured on an H200: 11.9 MB/s
// against 382 GB/s for our own allocation; README "GPU").
Napi::Value Mapping::SetupIpc(Worker* w, const uint8_t* handle, uint64_t offset, size_t length, int device, bool copy) {
  Napi::Env env = Env();
  size_t allocation = 0;
  cuda::CUdeviceptr base = cuda::OpenIpc(env, handle, device, &allocation);
  if (offset > allocation || length > allocation - offset) {
    cuda::ReleaseIpc(base);
    throw Napi::RangeError::New(env, "mapIpc: [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                                         ") is outside the exported allocation of " + std::to_string(allocation) + " bytes");
  }
  switch (cuda::KindOf(base)) {
    case cuda::MemoryKind::HOST: memType_ = UCS_MEMORY_TYPE_HOST; break;
    case cuda::MemoryKind::MANAGED: memType_ = UCS_MEMORY_TYPE_CUDA_MANAGED; break;
    default: memType_ = UCS_MEMORY_TYPE_CUDA;
  }
  if (memType_ != UCS_MEMORY_TYPE_HOST && (ContextMemoryTypes(w->ctx()) & UCS_BIT(memType_)) == 0) {
    cuda::ReleaseIpc(base);
    throw MakeError(env, "unavailable", UCS_ERR_UNSUPPORTED,
                    "mapIpc: this UCX context cannot register CUDA memory (UCX built without CUDA support, e.g. Debian's "
                    "libucx; build against the libucx-cu12/cu13 wheel: native/ucx/README.md \"GPU\")");
  }
  len_ = length;
  if (copy) {
    cuda::CUdeviceptr own = 0;
    try {
      own = cuda::CopyToOwn(env, device, base + offset, length);
    } catch (...) {
      cuda::ReleaseIpc(base);
      throw;
    }
    cuda::ReleaseIpc(base);
    // Our allocation is plain device memory, whatever the exporter's was (managed memory included).
    if (memType_ == UCS_MEMORY_TYPE_CUDA_MANAGED) memType_ = UCS_MEMORY_TYPE_CUDA;
    ptr_ = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(own));
    kind_ = CUDA_COPY;
    ownDevice_ = own;
    try {
      Register(w, "mapIpc");
    } catch (...) {
      cuda::FreeDevice(own);
      ownDevice_ = 0;
      throw;
    }
    return env.Undefined();
  }
  ptr_ = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(base + offset));
  kind_ = CUDA_IPC;
  ipcBase_ = base;
  try {
    Register(w, "mapIpc");
  } catch (...) {
    cuda::ReleaseIpc(base);
    ipcBase_ = 0;
    throw;
  }
  return env.Undefined();
}

void Mapping::DoUnmap() {
  if (!memh_) return;
  if ((kind_ == UCX_ALLOC || kind_ == FILE_MMAP) && !buf_.IsEmpty()) {
    // JS must not touch the memory once UCX frees it / we munmap it: detach the external ArrayBuffer
    // (every Buffer over it then reads as length 0) before releasing the memory.
    Napi::ArrayBuffer ab = buf_.Value().As<Napi::ArrayBuffer>();
    if (!ab.IsDetached()) ab.Detach();
  }
  if (worker_ && worker_->ctx()) ucp_mem_unmap(worker_->ctx(), memh_);
  memh_ = nullptr;
  if (kind_ == FILE_MMAP && ptr_) munmap(ptr_, len_);  // after ucp_mem_unmap: UCX no longer uses the range
  if (kind_ == CUDA_IPC && ipcBase_) { cuda::ReleaseIpc(ipcBase_); ipcBase_ = 0; }  // likewise
  if (kind_ == CUDA_COPY && ownDevice_) { cuda::FreeDevice(ownDevice_); ownDevice_ = 0; }  // likewise
  if (worker_) worker_->RemoveMapping(this);
  buf_.Reset();
  workerRef_.Reset();
  Unref();
}

Napi::Value Mapping::PackRkey(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!Usable()) throw MakeError(env, "closed", UCS_OK, "mapping is unmapped");
  void* rb = nullptr; size_t rs = 0;
  ucs_status_t st = ucp_rkey_pack(worker_->ctx(), memh_, &rb, &rs);
  if (st != UCS_OK) throw MakeError(env, "ucx", st, "ucp_rkey_pack failed");
  Napi::Buffer<uint8_t> out = Napi::Buffer<uint8_t>::Copy(env, static_cast<uint8_t*>(rb), rs);
  ucp_rkey_buffer_release(rb);
  return out;
}

Napi::Value Mapping::Unmap(const Napi::CallbackInfo& info) {
  if (memh_ && !unmapRequested_) {
    unmapRequested_ = true;
    if (inflight_ == 0) DoUnmap();   // otherwise deferred until in-flight ops complete
  }
  return info.Env().Undefined();
}

Napi::Function Mapping::Init(Napi::Env env) {
  return DefineClass(env, "Mapping", {
    InstanceMethod<&Mapping::PackRkey>("packRkey"),
    InstanceMethod<&Mapping::Unmap>("unmap"),
    InstanceAccessor<&Mapping::Address>("address"),
    InstanceAccessor<&Mapping::Length>("length"),
    InstanceAccessor<&Mapping::Mapped>("mapped"),
    InstanceAccessor<&Mapping::BufferJs>("buffer"),
    InstanceAccessor<&Mapping::MemoryTypeJs>("memoryType"),
    InstanceAccessor<&Mapping::AccessJs>("access"),
  });
}
Mapping::Mapping(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Mapping>(info) {}

}  // namespace robustrl::ucx
