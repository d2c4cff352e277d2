// JS errors of the addon. Every error the native side throws or rejects with carries `ucxKind`, `code` and
// `status`; the TS facade (lib/errors.ts) maps ucxKind to its error classes.
#pragma once

#include "common.h"

namespace robustrl::ucx {

// The symbolic name of a ucs_status_t ("UCS_ERR_UNREACHABLE"), "UCS_ERR_UNKNOWN" if not known.
const char* StatusName(ucs_status_t s);

// Statuses that mean the peer is gone or unreachable (-> kind "peer").
bool IsPeerFailure(ucs_status_t s);

// kind: "unavailable" | "peer" | "closed" | "timeout" | "ucx" — the TS facade maps it to a class.
Napi::Error MakeError(Napi::Env env, const char* kind, ucs_status_t status, const std::string& msg);

// An OS call failed (mapFile): ucxKind "ucx", code = the errno name (ENOENT, EACCES, ...), plus
// errno / syscall / path like Node's own fs errors, so callers can branch on e.code.
Napi::Error MakeErrnoError(Napi::Env env, int err, const char* syscall, const std::string& path, const std::string& msg);

// A promise already rejected with `err` (for operations that fail before anything is posted).
Napi::Value RejectedPromise(Napi::Env env, Napi::Error err);

}  // namespace robustrl::ucx
