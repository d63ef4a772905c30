// A plain driver for the fuzz targets, built with the project's own compiler (no clang, no
// libFuzzer needed): it feeds every file of the given folders (sorted, recursively) to
// LLVMFuzzerTestOneInput, then, with --mutations N, N deterministic mutants of each file (bytes
// flipped, inserted, removed, truncated, chunks duplicated, numbers and brackets planted). The
// mutants come from a fixed seed, so a run is reproducible; a crash kills the process (ctest
// reports it), and --save DIR writes the input in hand first so the crashing bytes can be kept.
//
//   tests/fuzz/<target>_replay [--mutations N] [--save DIR] FILE_OR_FOLDER...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

/// xorshift64*: small, fixed, the same on every platform.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ull;
  }
  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(Next() % n); }
};

const char* const kTokens[] = {"0",
                               "-1",
                               "1e300",
                               "-1e300",
                               "99999999999999999999999",
                               "NaN",
                               "nan",
                               "inf",
                               "\"",
                               "\\",
                               "{",
                               "}",
                               "[",
                               "]",
                               ",",
                               ":",
                               "\n",
                               "\r\n",
                               "\"\"",
                               "null",
                               "true",
                               "\xff",
                               "\xc3",
                               "\x00\x00\x00\x00",
                               "18446744073709551615",
                               "-9223372036854775808",
                               "4294967296",
                               ",,,,",
                               "\"a\"\"b\""};

std::string Mutate(std::string in, Rng& rng) {
  int steps = 1 + static_cast<int>(rng.Below(4));
  for (int k = 0; k < steps; ++k) {
    switch (rng.Below(7)) {
      case 0:  // flip a bit
        if (!in.empty()) in[rng.Below(in.size())] ^= static_cast<char>(1u << rng.Below(8));
        break;
      case 1:  // set a byte
        if (!in.empty()) in[rng.Below(in.size())] = static_cast<char>(rng.Below(256));
        break;
      case 2:  // truncate
        in.resize(rng.Below(in.size() + 1));
        break;
      case 3: {  // remove a run
        if (in.empty()) break;
        size_t at = rng.Below(in.size());
        in.erase(at, 1 + rng.Below(std::min<size_t>(64, in.size() - at)));
        break;
      }
      case 4: {  // duplicate a run
        if (in.empty()) break;
        size_t at = rng.Below(in.size());
        size_t len = 1 + rng.Below(std::min<size_t>(256, in.size() - at));
        in.insert(rng.Below(in.size() + 1), in.substr(at, len));
        break;
      }
      case 5: {  // plant a token
        const char* t = kTokens[rng.Below(std::size(kTokens))];
        size_t len = t[0] == 0 ? 4 : std::strlen(t);
        in.insert(rng.Below(in.size() + 1), std::string(t, len));
        break;
      }
      default: {  // overwrite with a token
        const char* t = kTokens[rng.Below(std::size(kTokens))];
        size_t len = t[0] == 0 ? 4 : std::strlen(t);
        if (in.size() >= len) in.replace(rng.Below(in.size() - len + 1), len, std::string(t, len));
        break;
      }
    }
  }
  return in;
}

void Collect(const fs::path& p, std::vector<fs::path>* out) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    std::vector<fs::path> here;
    for (const auto& e : fs::recursive_directory_iterator(p, ec))
      if (e.is_regular_file(ec) && e.path().filename() != "README.md") here.push_back(e.path());
    std::sort(here.begin(), here.end());
    out->insert(out->end(), here.begin(), here.end());
  } else if (fs::is_regular_file(p, ec)) {
    out->push_back(p);
  } else {
    std::cerr << "replay: " << p.string() << ": no such file or folder\n";
    std::exit(2);
  }
}

void Run(const std::string& bytes, const fs::path& save_dir) {
  if (!save_dir.empty()) {
    std::ofstream f(save_dir / "last_input", std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  fs::path save_dir;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mutations" && i + 1 < argc) mutations = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--save" && i + 1 < argc) save_dir = argv[++i];
    else Collect(a, &files);
  }
  if (files.empty()) {
    std::cerr << "usage: " << argv[0] << " [--mutations N] [--save DIR] FILE_OR_FOLDER...\n";
    return 2;
  }
  if (!save_dir.empty()) fs::create_directories(save_dir);
  size_t runs = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    std::ifstream f(files[i], std::ios::binary);
    std::string seed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    Run(seed, save_dir);
    ++runs;
    Rng rng{0x9E3779B97F4A7C15ull ^ (i + 1) * 0xBF58476D1CE4E5B9ull};
    for (long m = 0; m < mutations; ++m) {
      Run(Mutate(seed, rng), save_dir);
      ++runs;
    }
  }
  std::cout << "replay: " << files.size() << " inputs, " << runs << " runs, no crash\n";
  return 0;
}
