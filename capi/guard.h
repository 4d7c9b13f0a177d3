// The C ABI's error handling, shared by its translation units: every entry point runs its body
// through guarded(), which turns a Status into an fs_status and keeps the message per thread,
// and turns an escaping exception into FS_INTERNAL.
#pragma once

#include <exception>
#include <string>

#include "common/status.h"
#include "flashserve_c.h"

namespace flashserve::capi {

std::string& last_error();  // this thread's

inline int finish(const Status& st) {
  if (st.ok()) {
    last_error().clear();
    return FS_OK;
  }
  last_error() = st.to_string();
  return static_cast<int>(st.code());
}

template <typename F>
int guarded(const char* what, F&& f) {
  try {
    return finish(f());
  } catch (const std::exception& e) {
    last_error() = std::string(what) + ": " + e.what();
  } catch (...) {
    last_error() = std::string(what) + ": unknown exception";
  }
  return FS_INTERNAL;
}

}  // namespace flashserve::capi
