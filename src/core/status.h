#pragma once
/// Errors as values: Status for operations without a result, Expected<T> for those with one.
/// A finding (an unsupported API, a mismatching tensor) is data in a report, never a Status.
#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace portkit {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  ///< bad flag or value given by the user
  kNotFound,         ///< a path or entry that does not exist
  kIo,               ///< reading or writing failed
  kParse,            ///< input that does not follow its format
  kUnsupported,      ///< valid input we do not handle
  kInternal,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  /// The user-facing message, `path:line:col: what went wrong` where a location is known.
  const std::string& message() const { return message_; }

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorCode::kIo, std::move(m)}; }
inline Status ParseError(std::string m) { return {ErrorCode::kParse, std::move(m)}; }

/// Either a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : data_(std::move(value)) {}        // NOLINT: implicit by design
  Expected(Status status) : data_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(data_).ok() && "Expected<T> needs a value or an error");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace portkit

#define PORTKIT_RETURN_IF_ERROR(expr) \
  do {                                \
    ::portkit::Status _st = (expr);   \
    if (!_st.ok()) return _st;        \
  } while (0)
