#include "cli/cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/input_files.h"

namespace portkit::cli {
namespace fs = std::filesystem;

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk: return kExitOk;
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kIo:
    case ErrorCode::kParse:
    case ErrorCode::kUnsupported: return kExitUsage;
    case ErrorCode::kInternal: return kExitFailure;
  }
  return kExitFailure;
}

int Fail(Context& ctx, const Status& status) {
  if (!status.ok()) ctx.logger.Error(status.message());
  return ExitCodeFor(status);
}

std::span<const Alias> CommonAliases() {
  static constexpr Alias kAliases[] = {
      {"-env", "--env-path"}, {"-api", "--api-files"},      {"-dir", "--dir"},
      {"-out", "--out"},      {"--job_type", "--job-type"},
  };
  return kAliases;
}

#ifndef PORTKIT_VERSION_STRING
#define PORTKIT_VERSION_STRING "0.0.0"
#endif

namespace {

/// Whether argv (before `--`) holds `--version` with no value after it: the program's version is
/// asked for. analyse and migrate read `-v, --version VERSION` as the torch version of the code;
/// given a value there, it stays that.
bool AsksForVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") return false;
    if (a == "--version" && (i + 1 == argc || argv[i + 1][0] == '-')) return true;
  }
  return false;
}

/// A mistyped subcommand, where one is required (CLI11 would say only "A subcommand is
/// required"): "portkit prof: unknown subcommand 'nosuch'; use one of collect, import, ...".
/// Empty when the words that name subcommands are all known.
std::string UnknownSubcommand(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* level = &app;
  for (size_t i = 1; i < args.size() && level->get_require_subcommand_min() > 0; ++i) {
    const std::string& word = args[i];
    if (word.empty() || word[0] == '-') break;
    auto subs = level->get_subcommands([](const CLI::App*) { return true; });
    auto found = std::find_if(subs.begin(), subs.end(), [&](const CLI::App* sub) { return sub->check_name(word); });
    if (found != subs.end()) {
      level = *found;
      continue;
    }
    std::string names;
    for (const CLI::App* sub : subs) names += (names.empty() ? "" : ", ") + sub->get_name();
    std::string path = app.get_name();
    for (size_t k = 1; k < i; ++k) path += " " + args[k];
    return path + ": unknown subcommand '" + word + "'; use one of " + names + " (" + path + " --help)";
  }
  return {};
}

}  // namespace

std::optional<int> Parse(CLI::App& app, int argc, char** argv, std::span<const Alias> aliases) {
  if (AsksForVersion(argc, argv)) {
    std::printf("portkit %s\n", PORTKIT_VERSION_STRING);
    return kExitOk;
  }
  std::vector<std::string> args;
  args.reserve(static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0) {
      for (const Alias& alias : aliases) {
        if (a == alias.spelling) {
          a = alias.canonical;
          break;
        }
        if (a.size() > alias.spelling.size() && a.compare(0, alias.spelling.size(), alias.spelling) == 0 &&
            a[alias.spelling.size()] == '=') {
          a = std::string(alias.canonical) + a.substr(alias.spelling.size());
          break;
        }
      }
    }
    args.push_back(std::move(a));
  }
  if (std::string unknown = UnknownSubcommand(app, args); !unknown.empty()) {
    std::fprintf(stderr, "%s\n", unknown.c_str());
    return kExitUsage;
  }
  std::vector<const char*> cargv;
  for (const auto& a : args) cargv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(cargv.size()), const_cast<char**>(cargv.data()));
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return std::nullopt;
}

CLI::Option* AddFormatOption(CLI::App& app, std::vector<std::string>* formats, std::vector<std::string> allowed,
                             std::vector<std::string> default_formats) {
  *formats = default_formats;
  std::string allowed_text, default_text;
  for (const auto& a : allowed) allowed_text += (allowed_text.empty() ? "" : ", ") + a;
  for (const auto& d : default_formats) default_text += (default_text.empty() ? "" : ",") + d;
  auto* opt = app.add_option_function<std::string>(
      "--format",
      [formats](const std::string& value) {
        formats->clear();
        size_t start = 0;
        while (true) {
          size_t comma = value.find(',', start);
          std::string f = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          if (std::find(formats->begin(), formats->end(), f) == formats->end()) formats->push_back(f);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      },
      "outputs to write, comma-separated: " + allowed_text + " (default " + default_text + ")");
  opt->check(CLI::Validator(
      [allowed](std::string& value) -> std::string {
        size_t start = 0;
        while (true) {
          size_t comma = value.find(',', start);
          std::string f = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
          if (std::find(allowed.begin(), allowed.end(), f) == allowed.end()) {
            std::string list;
            for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
            return "unknown format '" + f + "'; use " + list + " or a comma list";
          }
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
        return {};
      },
      "FORMAT[,FORMAT...]"));
  return opt;
}

bool Wants(const std::vector<std::string>& formats, std::string_view format) {
  return std::find(formats.begin(), formats.end(), format) != formats.end();
}

CLI::Option* AddJobsOption(CLI::App& app, int* jobs) {
  return app.add_option("-j,--jobs", *jobs, "worker threads, at least 1 (default: one per core)")
      ->check(CLI::Range(1, 4096));
}

Status CheckInput(const fs::path& path, std::string_view option, PathKind kind) {
  std::error_code ec;
  PORTKIT_RETURN_IF_ERROR(RefuseSymlinkedPath(path, option));
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return NotFound(std::string(option) + " " + path.string() + " does not exist");
  if (kind == PathKind::kFile && fs::is_directory(st))
    return InvalidArgument(std::string(option) + " " + path.string() + " is a folder; give a file");
  if (kind == PathKind::kDirectory && !fs::is_directory(st))
    return InvalidArgument(std::string(option) + " " + path.string() + " is not a folder");
  if (!fs::is_directory(st) && !fs::is_regular_file(st))
    return InvalidArgument(std::string(option) + " " + path.string() + " is " + DescribeFileType(path) +
                           ", not a regular file; not read");
  if (::access(path.c_str(), R_OK) != 0)
    return IoError(std::string(option) + " " + path.string() + " cannot be read (permission denied)");
  return Status::Ok();
}

Status CheckOutputFolder(const fs::path& path, std::string_view option) {
  std::error_code ec;
  PORTKIT_RETURN_IF_ERROR(RefuseSymlinkedPath(path, option));
  fs::path p = path.empty() ? fs::path(".") : path;
  fs::path probe = fs::absolute(p, ec);
  if (ec) probe = p;
  // The nearest existing ancestor decides: a folder we may write into, or the end of the road.
  while (!probe.empty()) {
    auto st = fs::status(probe, ec);
    if (!ec && fs::exists(st)) {
      if (!fs::is_directory(st))
        return IoError(std::string(option) + " " + path.string() + " cannot be created: " + probe.string() +
                       " is not a folder");
      // access() says yes to root everywhere, and nothing about /proc or a read-only mount:
      // create and remove a probe folder instead.
      std::string tmpl = (probe / ".portkit-probe-XXXXXX").string();
      if (char* made = ::mkdtemp(tmpl.data())) {
        ::rmdir(made);
        return Status::Ok();
      }
      return IoError(std::string(option) + " " + path.string() + " cannot be written: " + probe.string() +
                     " is not writable (" + std::strerror(errno) + ")");
    }
    if (probe == probe.parent_path()) break;
    probe = probe.parent_path();
  }
  return IoError(std::string(option) + " " + path.string() + " cannot be created");
}

Status CheckOutputFile(const fs::path& path, std::string_view option) {
  std::error_code ec;
  PORTKIT_RETURN_IF_ERROR(RefuseSymlinkedPath(path, option));
  if (fs::is_directory(path, ec))
    return InvalidArgument(std::string(option) + " " + path.string() + " is a folder; give a file name");
  fs::path parent = path.parent_path();
  return CheckOutputFolder(parent.empty() ? fs::path(".") : parent, option);
}

bool StartsWithAny(const fs::path& path, const std::vector<std::string_view>& heads) {
  size_t longest = 0;
  for (auto head : heads) longest = std::max(longest, head.size());
  auto fd = OpenInputFile(path, Links::kRefuse);
  if (!fd.ok() || longest == 0) return false;
  std::string first(longest, '\0');
  size_t got = 0;
  while (got < longest) {
    ssize_t n = ::read(fd->get(), first.data() + got, longest - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  first.resize(got);
  for (auto head : heads)
    if (!head.empty() && std::string_view(first).substr(0, head.size()) == head) return true;
  return false;
}

}  // namespace portkit::cli
