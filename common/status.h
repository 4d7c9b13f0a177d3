// Status: the error type every kernel, planner and cache call returns. A code for programs
// and a message for people; never an exception across a public boundary, never an abort.
#pragma once

#include <string>
#include <utility>

namespace flashserve {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // wrong shapes, inconsistent lengths, null or misaligned pointers
  kOutOfRange = 2,        // ids out of range: block ids, sequence lengths beyond a table
  kUnsupported = 3,       // a valid request this build or device does not implement
  kResourceExhausted = 4, // out of blocks or workspace
  kInternal = 5,          // a bug of ours or a failed CUDA call
  kUnavailable = 6,       // shutting down, draining
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: prefill: head_dim 0 is not supported ..."
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status out_of_range(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

}  // namespace flashserve

#define FS_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::flashserve::Status fs_status_ = (expr);     \
    if (!fs_status_.ok()) return fs_status_;      \
  } while (0)
