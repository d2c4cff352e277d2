// REQUIRE_OPEN: the guard of the Worker's synchronous JS methods (worker_connect.cc, worker_memory.cc) —
// throws 'closed' and returns undefined once close() was called. Only for Worker member functions.
#pragma once

#include "errors.h"

#define REQUIRE_OPEN(env)                                                                     \
  if (closed_) { MakeError(env, "closed", UCS_OK, "worker is closed").ThrowAsJavaScriptException(); return env.Undefined(); }
