#pragma once
/// Run log in the original tool's format: `YYYY-MM-DD hh:mm:ss [INFO]    message`, to the console and kept
/// in memory so the command can write it to its log file (atomically) when it ends.
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace portkit {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

/// Wall clock, injectable so tests get stable timestamps.
using Clock = std::function<std::chrono::system_clock::time_point()>;
Clock SystemClock();

class Logger {
 public:
  /// `console` may be null (quiet); lines below `console_level` are kept for the file only.
  Logger(std::FILE* console, Clock clock, LogLevel console_level = LogLevel::kInfo);

  void Log(LogLevel level, std::string_view message);
  void Info(std::string_view m) { Log(LogLevel::kInfo, m); }
  void Warning(std::string_view m) { Log(LogLevel::kWarning, m); }
  void Error(std::string_view m) { Log(LogLevel::kError, m); }
  void Debug(std::string_view m) { Log(LogLevel::kDebug, m); }

  /// Everything logged so far (all levels from Info up), one line per message.
  std::string Contents() const;
  size_t warnings() const;
  size_t errors() const;

  /// `YYYY-MM-DD hh:mm:ss [LEVEL]   ` prefix for a time point (local time).
  static std::string Prefix(std::chrono::system_clock::time_point t, LogLevel level);

 private:
  mutable std::mutex mu_;
  std::FILE* console_;
  Clock clock_;
  LogLevel console_level_;
  std::string kept_;
  size_t warnings_ = 0;
  size_t errors_ = 0;
};

/// Progress of long work in the original tool's form `[Progress: 12.50%]  message`; thread-safe.
class Progress {
 public:
  Progress(Logger& logger, size_t total) : logger_(logger), total_(total) {}
  /// Logs `message` with the share of work done *before* this step.
  void Start(std::string_view message);
  /// Counts one unit done and logs `message` with the new share.
  void Done(std::string_view message);
  /// Logs a final line at 100 %.
  void Finish(std::string_view message);
  static std::string Percent(size_t done, size_t total);

 private:
  Logger& logger_;
  std::mutex mu_;
  size_t total_;
  size_t done_ = 0;
};

}  // namespace portkit
