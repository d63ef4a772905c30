#include "cli/analyse_config.h"

#include <toml++/toml.h>
#include <algorithm>

#include "core/atomic_file.h"

namespace portkit::cli {
namespace {

std::string Where(const std::filesystem::path& file, const toml::source_region& at) {
  return file.string() + ":" + std::to_string(at.begin.line) + ":" + std::to_string(at.begin.column);
}

/// A string, or an array of strings; a string with commas is a list (as on the command line).
Expected<std::vector<std::string>> StringList(const std::filesystem::path& file, const std::string& key,
                                              const toml::node& node, bool split_commas) {
  std::vector<std::string> out;
  auto add = [&](const std::string& text) {
    if (!split_commas) {
      out.push_back(text);
      return;
    }
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      if (comma > start) out.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
  };
  if (const auto* s = node.as_string()) {
    add(s->get());
    return out;
  }
  if (const auto* array = node.as_array()) {
    for (const toml::node& element : *array) {
      const auto* s = element.as_string();
      if (!s)
        return ParseError(Where(file, element.source()) + ": tool.portkit." + key +
                          ": expected an array of strings; this element is not a string");
      add(s->get());
    }
    return out;
  }
  return ParseError(Where(file, node.source()) + ": tool.portkit." + key +
                    ": expected a string or an array of strings");
}

Expected<std::string> OneString(const std::filesystem::path& file, const std::string& key, const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  return ParseError(Where(file, node.source()) + ": tool.portkit." + key + ": expected a string");
}

}  // namespace

const std::vector<std::string>& AnalyseConfigKeys() {
  static const std::vector<std::string> kKeys = {"select", "ignore", "exclude", "target",   "version",
                                                 "mode",   "format", "fail-on", "env-path", "max-file-mb"};
  return kKeys;
}

Expected<AnalyseConfig> ReadAnalyseConfig(const std::filesystem::path& file) {
  auto text = ReadFile(file);
  if (!text.ok()) return text.status();
  AnalyseConfig config;
  config.file = file;
  toml::table root;
  try {
    root = toml::parse(*text, file.string());
  } catch (const toml::parse_error& e) {
    return ParseError(Where(file, e.source()) + ": not valid TOML: " + std::string(e.description()));
  }
  const toml::node* tool = root.get("tool");
  const toml::table* tool_table = tool ? tool->as_table() : nullptr;
  const toml::node* portkit = tool_table ? tool_table->get("portkit") : nullptr;
  if (!portkit) return config;
  const toml::table* table = portkit->as_table();
  if (!table) return ParseError(Where(file, portkit->source()) + ": tool.portkit: expected a table ([tool.portkit])");

  // Sorted by key: warnings and errors come in the same order on every run.
  std::vector<std::pair<std::string, const toml::node*>> entries;
  for (auto&& [key, node] : *table) entries.emplace_back(std::string(key.str()), &node);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [written, node] : entries) {
    std::string key = written;
    std::replace(key.begin(), key.end(), '_', '-');  // fail_on reads as fail-on
    Status st;
    auto list = [&](std::optional<std::vector<std::string>>& into, bool split) {
      auto v = StringList(file, written, *node, split);
      if (!v.ok()) st = v.status();
      else into = std::move(*v);
    };
    auto one = [&](std::optional<std::string>& into) {
      auto v = OneString(file, written, *node);
      if (!v.ok()) st = v.status();
      else into = std::move(*v);
    };
    config.places[key] = Where(file, node->source());
    if (key == "select") list(config.select, true);
    else if (key == "ignore") list(config.ignore, true);
    else if (key == "exclude") list(config.exclude, false);
    else if (key == "format") list(config.format, true);
    else if (key == "fail-on") list(config.fail_on, true);
    else if (key == "env-path") list(config.env_path, false);
    else if (key == "target") one(config.target);
    else if (key == "version") one(config.version);
    else if (key == "mode") one(config.mode);
    else if (key == "max-file-mb") {
      const auto* n = node->as_integer();
      if (!n || n->get() < 1 || n->get() > (int64_t{1} << 20))
        st = ParseError(Where(file, node->source()) + ": tool.portkit." + written +
                        ": expected a whole number of MiB from 1 to 1048576");
      else config.max_file_mb = n->get();
    } else {
      std::string known;
      for (const auto& k : AnalyseConfigKeys()) known += (known.empty() ? "" : ", ") + k;
      config.warnings.push_back(Where(file, node->source()) + ": unknown key 'tool.portkit." + written +
                                "', ignored (known keys: " + known + ")");
    }
    if (!st.ok()) return st;
  }
  // Paths in the file are relative to the file's folder, wherever portkit runs from.
  std::filesystem::path folder = file.parent_path();
  auto anchor = [&](std::string& path) {
    if (!path.empty() && std::filesystem::path(path).is_relative()) path = (folder / path).lexically_normal().string();
  };
  if (config.target && config.target->find('/') != std::string::npos) anchor(*config.target);
  if (config.env_path)
    for (auto& p : *config.env_path) anchor(p);
  return config;
}

}  // namespace portkit::cli
