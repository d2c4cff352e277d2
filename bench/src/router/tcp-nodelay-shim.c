/*
 * TCP_NODELAY for a process that does not set it (LD_PRELOAD): after a successful connect(), accept()
 * or accept4() on a TCP socket, set TCP_NODELAY on it. bench:router runs the SGLang Model Gateway with
 * it, so the comparison with robustrl's router (Node sets TCP_NODELAY on every socket) measures routing,
 * not Nagle's algorithm holding back the small SSE chunks of a stream behind an unacknowledged one.
 *
 * Built by deploy/local/router-baselines.sh: gcc -shared -fPIC -O2 -o tcp-nodelay.so tcp-nodelay-shim.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);

/* Only TCP stream sockets: setsockopt on a Unix socket would fail harmlessly, but skipping it keeps
   errno as the caller left it. errno is saved anyway, since connect() on a non-blocking socket returns
   -1 with EINPROGRESS and the caller reads errno after us. */
static void nodelay(int fd) {
  int saved = errno;
  int type = 0;
  socklen_t len = sizeof type;
  struct sockaddr_storage addr;
  socklen_t alen = sizeof addr;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM &&
      getsockname(fd, (struct sockaddr *)&addr, &alen) == 0 && (addr.ss_family == AF_INET || addr.ss_family == AF_INET6)) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  errno = saved;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
  static connect_fn real;
  if (!real) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
  int rc = real(fd, addr, len);
  /* A non-blocking connect (tokio's) returns EINPROGRESS: the option set now holds once it connects. */
  if (rc == 0 || errno == EINPROGRESS) nodelay(fd);
  return rc;
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
  static accept_fn real;
  if (!real) real = (accept_fn)dlsym(RTLD_NEXT, "accept");
  int rc = real(fd, addr, len);
  if (rc >= 0) nodelay(rc);
  return rc;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
  static accept4_fn real;
  if (!real) real = (accept4_fn)dlsym(RTLD_NEXT, "accept4");
  int rc = real(fd, addr, len, flags);
  if (rc >= 0) nodelay(rc);
  return rc;
}
