#include "analyse/rule_docs.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "core/atomic_file.h"

namespace portkit::analyse {
namespace fs = std::filesystem;

std::vector<const RuleDoc*> RuleDocs() {
  std::vector<const RuleDoc*> out;
  for (const auto& d : GeneratedRuleDocs()) out.push_back(&d);
  std::sort(out.begin(), out.end(), [](const RuleDoc* a, const RuleDoc* b) { return a->name < b->name; });
  return out;
}

const RuleDoc* FindRuleDoc(std::string_view name) {
  for (const auto& d : GeneratedRuleDocs())
    if (d.name == name) return &d;
  return nullptr;
}

std::string RuleSummary(const RuleDoc& doc) {
  std::string_view what = doc.what;
  // The first sentence: up to ". ", ": " or "; " outside backquotes and parentheses (not the
  // dot of "e.g." or "i.e."), else the whole text.
  bool quoted = false;
  int depth = 0;
  for (size_t i = 0; i + 1 < what.size(); ++i) {
    char c = what[i];
    if (c == '`') quoted = !quoted;
    if (quoted) continue;
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (depth > 0 || what[i + 1] != ' ' || (c != '.' && c != ':' && c != ';')) continue;
    if (c == '.' && i >= 3 && (what.substr(i - 3, 4) == "e.g." || what.substr(i - 3, 4) == "i.e.")) continue;
    return std::string(what.substr(0, i)) + ".";
  }
  std::string s(what);
  if (!s.empty() && s.back() != '.') s += '.';
  return s;
}

namespace {

/// `text` wrapped at `width` columns, each line indented by `indent` spaces.
std::string Wrap(std::string_view text, size_t indent, size_t width) {
  std::string out, line;
  auto flush = [&] {
    if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
    line.clear();
  };
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(at, end - at);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) flush();
    if (!word.empty()) line += (line.empty() ? "" : " ") + std::string(word);
    at = end + 1;
  }
  flush();
  return out;
}

}  // namespace

std::string RuleDocText(const RuleDoc& doc) {
  std::string out = std::string(doc.name) + (doc.note.empty() ? "" : " " + std::string(doc.note)) + " [" +
                    std::string(doc.family) + "]\n";
  auto section = [&](std::string_view title, std::string_view text) {
    if (!text.empty()) out += "\n" + std::string(title) + ":\n" + Wrap(text, 2, 100);
  };
  section("What it finds", doc.what);
  section("Why it matters", doc.why);
  section("Example", doc.example);
  section("Use instead", doc.use_instead);
  out += "\nSuppress one finding with a comment `# portkit: ignore[" + std::string(doc.name) +
         "]` on its line; all of them with --ignore " + std::string(doc.name) + ".\n";
  return out;
}

std::string RuleDocMarkdown(const RuleDoc& doc) {
  std::string out;
  auto section = [&](std::string_view title, std::string_view text) {
    if (!text.empty()) out += "**" + std::string(title) + ":** " + std::string(text) + "\n\n";
  };
  section("What it finds", doc.what);
  section("Why it matters", doc.why);
  section("Example", doc.example);
  section("Use instead", doc.use_instead);
  out += "Suppress one finding with `# portkit: ignore[" + std::string(doc.name) + "]` on its line.";
  return out;
}

size_t FilterFindingsByRule(std::vector<Finding>& findings, const std::vector<std::string>& select,
                            const std::vector<std::string>& ignore) {
  size_t before = findings.size();
  auto listed = [](const std::vector<std::string>& names, const std::string& rule) {
    return std::find(names.begin(), names.end(), rule) != names.end();
  };
  findings.erase(std::remove_if(findings.begin(), findings.end(),
                                [&](const Finding& f) {
                                  return (!select.empty() && !listed(select, f.rule)) || listed(ignore, f.rule);
                                }),
                 findings.end());
  return before - findings.size();
}

namespace {

/// The rules an inline comment on `line` suppresses: "*" for every rule, none when no comment.
std::vector<std::string> SuppressedRules(std::string_view line) {
  static const std::regex re(R"(#\s*portkit:\s*ignore(\[([^\]]*)\])?)");
  std::vector<std::string> out;
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, re)) return out;
  if (!m[1].matched) return {"*"};
  std::string list = m[2].str();
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string name = list.substr(start, comma - start);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    if (!name.empty()) out.push_back(name);
    start = comma + 1;
  }
  return out;
}

}  // namespace

size_t ApplyInlineSuppressions(std::vector<Finding>& findings, std::string_view project, const std::string& root) {
  // Lines (by number) of each file with findings that carry a suppression comment.
  std::map<std::string, std::map<uint32_t, std::vector<std::string>>> marks;
  std::string prefix = std::string(project) + "/";
  for (const auto& f : findings) {
    if (marks.count(f.file) || f.start_line == 0 || f.file.compare(0, prefix.size(), prefix) != 0) continue;
    auto& lines = marks[f.file];
    auto text = ReadFile(fs::path(root) / f.file.substr(prefix.size()));
    if (!text.ok() || text->find("portkit:") == std::string::npos) continue;
    std::string_view rest = *text;
    uint32_t number = 1;
    while (!rest.empty()) {
      size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      if (line.find("portkit:") != std::string_view::npos) {
        auto rules = SuppressedRules(line);
        if (!rules.empty()) lines[number] = std::move(rules);
      }
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
      ++number;
    }
  }
  size_t before = findings.size();
  findings.erase(std::remove_if(findings.begin(), findings.end(),
                                [&](const Finding& f) {
                                  auto file = marks.find(f.file);
                                  if (file == marks.end()) return false;
                                  auto line = file->second.find(f.start_line);
                                  if (line == file->second.end()) return false;
                                  const auto& rules = line->second;
                                  return rules[0] == "*" ||
                                         std::find(rules.begin(), rules.end(), f.rule) != rules.end();
                                }),
                 findings.end());
  return before - findings.size();
}

}  // namespace portkit::analyse
