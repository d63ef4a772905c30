// portkit: tools for moving PyTorch models onto a new accelerator (Ascend NPU first).
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "core/context.h"
#include "core/log.h"

#ifndef PORTKIT_VERSION
#define PORTKIT_VERSION "0.0.0"
#endif

namespace {

void PrintHelp(std::FILE* out) {
  std::fprintf(out,
               "portkit %s — port PyTorch models to a new accelerator and make them fast there\n\n"
               "Usage: portkit <command> [options]\n"
               "       portkit <command> --help\n\n"
               "Commands:\n",
               PORTKIT_VERSION);
  for (size_t i = 0; i < portkit::cli::kCommandCount; ++i) {
    const auto& c = portkit::cli::kCommands[i];
    std::fprintf(out, "  %-10.*s %.*s\n", static_cast<int>(c.name.size()), c.name.data(),
                 static_cast<int>(c.help.size()), c.help.data());
  }
  std::fprintf(out,
               "\nOptions:\n  -h, --help     show this help\n  --version      print the version\n\n"
               "Data files (target support tables, rules): the folders of $PORTKIT_DATA_DIR\n"
               "(colon-separated, first wins) laid over the shipped data/ folder (docs/targets.md).\n");
}

}  // namespace

// Big structures are left to the OS at exit, except under AddressSanitizer, whose leak check would
// report them (docs/safety.md, sanitizer build).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kFreeMemoryAtEnd = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kFreeMemoryAtEnd = true;
#else
constexpr bool kFreeMemoryAtEnd = false;
#endif
#else
constexpr bool kFreeMemoryAtEnd = false;
#endif

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintHelp(stderr);
    return 2;
  }
  std::string first = argv[1];
  if (first == "-h" || first == "--help" || first == "help") {
    PrintHelp(stdout);
    return 0;
  }
  if (first == "--version" || first == "-V") {
    std::printf("portkit %s\n", PORTKIT_VERSION);
    return 0;
  }
  for (size_t i = 0; i < portkit::cli::kCommandCount; ++i) {
    const auto& c = portkit::cli::kCommands[i];
    if (first != c.name) continue;
    portkit::Logger logger(stderr, portkit::SystemClock());
    portkit::Context ctx{logger, portkit::SystemClock(), portkit::FindDataDir(), 0, kFreeMemoryAtEnd};
    std::string name = "portkit " + first;
    std::vector<char*> args;
    args.push_back(name.data());
    for (int a = 2; a < argc; ++a) args.push_back(argv[a]);
    return c.run(static_cast<int>(args.size()), args.data(), ctx);
  }
  std::fprintf(stderr, "portkit: unknown command '%s'; run 'portkit --help' for the list\n", first.c_str());
  return 2;
}
