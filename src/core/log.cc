#include "core/log.h"

#include <ctime>

namespace portkit {

Clock SystemClock() {
  return [] { return std::chrono::system_clock::now(); };
}

Logger::Logger(std::FILE* console, Clock clock, LogLevel console_level)
    : console_(console), clock_(std::move(clock)), console_level_(console_level) {}

std::string Logger::Prefix(std::chrono::system_clock::time_point t, LogLevel level) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  std::string out = buf;
  switch (level) {
    case LogLevel::kDebug: out += " [DEBUG]   "; break;
    case LogLevel::kInfo: out += " [INFO]    "; break;
    case LogLevel::kWarning: out += " [WARNING] "; break;
    case LogLevel::kError: out += " [ERROR]   "; break;
  }
  return out;
}

void Logger::Log(LogLevel level, std::string_view message) {
  std::string line = Prefix(clock_(), level);
  line.append(message);
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  if (level == LogLevel::kWarning) ++warnings_;
  if (level == LogLevel::kError) ++errors_;
  if (level >= LogLevel::kInfo) kept_ += line;
  if (console_ && level >= console_level_) {
    std::fwrite(line.data(), 1, line.size(), console_);
    std::fflush(console_);
  }
}

std::string Logger::Contents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kept_;
}

size_t Logger::warnings() const {
  std::lock_guard<std::mutex> lock(mu_);
  return warnings_;
}

size_t Logger::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return errors_;
}

std::string Progress::Percent(size_t done, size_t total) {
  double pct = total == 0 ? 100.0 : 100.0 * static_cast<double>(done) / static_cast<double>(total);
  char buf[32];
  std::snprintf(buf, sizeof buf, "[Progress:%6.2f%%]  ", pct);
  return buf;
}

void Progress::Start(std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  logger_.Info(Percent(done_, total_) + std::string(message));
}

void Progress::Done(std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  logger_.Info(Percent(done_, total_) + std::string(message));
}

void Progress::Finish(std::string_view message) {
  std::lock_guard<std::mutex> lock(mu_);
  logger_.Info(Percent(total_, total_) + std::string(message));
}

}  // namespace portkit
