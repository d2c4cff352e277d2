/*
 * A stand-in for libcuda.so.1 for machines without a GPU, loaded by the addon through
 * ROBUSTRL_CUDA_DRIVER (tests only). "Device memory" is a /dev/shm file mapped MAP_SHARED, its "IPC
 * handle" is the file's name, and the driver reports the memory as host memory, so UCX registers it
 * as such. What it lets a CPU-only machine test is everything around the device: the addon's IPC
 * import (opened once per process, counted, closed on unmap, range checks), the facade, and the agent's
 * weight plane over handles exported by another process (a framework's tensors). It behaves as the
 * driver does where that matters: a handle cannot be opened in the process that exported it, nor twice
 * in one process (the addon must share its first opening), and a closed allocation is gone.
 * Build: cc -shared -fPIC -o fake-libcuda.so fake-libcuda.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { char reserved[64]; } CUipcMemHandle;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DEVICE = 101, INVALID_CONTEXT = 201, ALREADY_MAPPED = 208, NOT_FOUND = 500 };
#define MAGIC "RBFAKECU"
#define MAX_REGIONS 4096

struct region { CUdeviceptr base; size_t size; char name[48]; int owned; int used; };
static struct region regions[MAX_REGIONS];
static unsigned long counter;
static __thread void* current;
static int primary_ctx = 1;

static struct region* find(CUdeviceptr p) {
  for (int i = 0; i < MAX_REGIONS; i++)
    if (regions[i].used && p >= regions[i].base && p < regions[i].base + regions[i].size) return &regions[i];
  return NULL;
}
static struct region* slot(void) {
  for (int i = 0; i < MAX_REGIONS; i++) if (!regions[i].used) return &regions[i];
  return NULL;
}

CUresult cuInit(unsigned int flags) { (void)flags; return OK; }
CUresult cuDriverGetVersion(int* v) { *v = 13000; return OK; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return OK; }
CUresult cuDeviceGet(int* d, int ordinal) { if (ordinal != 0) return INVALID_DEVICE; *d = 0; return OK; }
CUresult cuDeviceGetName(char* name, int len, int dev) { (void)dev; snprintf(name, (size_t)len, "robustrl fake CUDA device"); return OK; }
CUresult cuDeviceGetPCIBusId(char* bus, int len, int dev) { (void)dev; snprintf(bus, (size_t)len, "0000:00:00.0"); return OK; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) { (void)dev; *ctx = &primary_ctx; return OK; }
CUresult cuCtxSetCurrent(void* ctx) { current = ctx; return OK; }
CUresult cuCtxGetCurrent(void** ctx) { *ctx = current; return OK; }
CUresult cuCtxSynchronize(void) { return current ? OK : INVALID_CONTEXT; }

CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t size) {
  if (!current) return INVALID_CONTEXT;
  struct region* r = slot();
  if (!r || size == 0) return size == 0 ? INVALID_VALUE : OUT_OF_MEMORY;
  snprintf(r->name, sizeof r->name, "robustrl-fakecuda-%d-%lu", (int)getpid(), ++counter);
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/%s", r->name);
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return OUT_OF_MEMORY;
  if (ftruncate(fd, (off_t)size) != 0) { close(fd); unlink(path); return OUT_OF_MEMORY; }
  void* m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) { unlink(path); return OUT_OF_MEMORY; }
  r->base = (CUdeviceptr)(uintptr_t)m; r->size = size; r->owned = 1; r->used = 1;
  *p = r->base;
  return OK;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  struct region* r = find(p);
  if (!r || r->base != p || !r->owned) return INVALID_VALUE;
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/%s", r->name);
  munmap((void*)(uintptr_t)r->base, r->size);
  unlink(path);
  r->used = 0;
  return OK;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  struct region* r = find(p);
  if (!r) return NOT_FOUND;
  if (base) *base = r->base;
  if (size) *size = r->size;
  return OK;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) { if (!find(src)) return INVALID_VALUE; memcpy(dst, (void*)(uintptr_t)src, n); return OK; }
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) { if (!find(dst)) return INVALID_VALUE; memcpy((void*)(uintptr_t)dst, src, n); return OK; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  if (!find(dst) || !find(src)) return INVALID_VALUE;
  memmove((void*)(uintptr_t)dst, (void*)(uintptr_t)src, n);
  return OK;
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) {
  struct region* r = find(p);
  if (!r || r->base != p || !r->owned) return INVALID_VALUE;
  memset(h, 0, sizeof *h);
  memcpy(h->reserved, MAGIC, 8);
  memcpy(h->reserved + 8, r->name, strlen(r->name) + 1);
  return OK;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* p, CUipcMemHandle h, unsigned int flags) {
  (void)flags;
  if (!current) return INVALID_CONTEXT;
  if (memcmp(h.reserved, MAGIC, 8) != 0) return INVALID_VALUE;
  char name[48];
  memcpy(name, h.reserved + 8, sizeof name);
  name[sizeof name - 1] = 0;
  for (int i = 0; i < MAX_REGIONS; i++)
    if (regions[i].used && strcmp(regions[i].name, name) == 0) return regions[i].owned ? INVALID_CONTEXT : ALREADY_MAPPED;
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/%s", name);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return INVALID_VALUE;  /* the exporter freed it (or died) */
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size == 0) { close(fd); return INVALID_VALUE; }
  void* m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return OUT_OF_MEMORY;
  struct region* r = slot();
  if (!r) { munmap(m, (size_t)st.st_size); return OUT_OF_MEMORY; }
  r->base = (CUdeviceptr)(uintptr_t)m; r->size = (size_t)st.st_size; r->owned = 0; r->used = 1;
  snprintf(r->name, sizeof r->name, "%s", name);
  *p = r->base;
  return OK;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  struct region* r = find(p);
  if (!r || r->base != p || r->owned) return INVALID_VALUE;
  munmap((void*)(uintptr_t)r->base, r->size);
  r->used = 0;
  return OK;
}

/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2): host memory, so that UCX registers it as such. */
CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr p) {
  if (attribute != 2 || !find(p)) return INVALID_VALUE;
  *(unsigned*)data = 1;
  return OK;
}

/* For tests: how many allocations this process has open from other processes' handles. */
int robustrlFakeCudaOpenHandles(void) {
  int n = 0;
  for (int i = 0; i < MAX_REGIONS; i++) n += regions[i].used && !regions[i].owned;
  return n;
}

CUresult cuGetErrorName(CUresult r, const char** s) {
  switch (r) {
    case OK: *s = "CUDA_SUCCESS"; break;
    case INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
    case OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case INVALID_DEVICE: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case INVALID_CONTEXT: *s = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case ALREADY_MAPPED: *s = "CUDA_ERROR_ALREADY_MAPPED"; break;
    case NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    default: *s = NULL; return INVALID_VALUE;
  }
  return OK;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
  const char* name = NULL;
  if (cuGetErrorName(r, &name) != OK) { *s = NULL; return INVALID_VALUE; }
  *s = "(robustrl fake CUDA driver)";
  return OK;
}
