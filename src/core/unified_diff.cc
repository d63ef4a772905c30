#include "core/unified_diff.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace portkit {
namespace {

std::vector<std::string_view> Lines(std::string_view s) {
  std::vector<std::string_view> out;
  size_t b = 0;
  while (b < s.size()) {
    size_t e = s.find('\n', b);
    if (e == std::string_view::npos) e = s.size() - 1;
    out.push_back(s.substr(b, e - b + 1));
    b = e + 1;
  }
  return out;
}

enum class Op : char { kKeep = ' ', kDelete = '-', kInsert = '+' };

// Myers' greedy algorithm with a saved trace per D to recover the edit script.
std::vector<Op> Script(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  const long n = static_cast<long>(a.size()), m = static_cast<long>(b.size()), max = n + m;
  std::vector<long> v(2 * static_cast<size_t>(max) + 2, 0);
  std::vector<std::vector<long>> trace;
  long d_end = 0;
  for (long d = 0; d <= max; ++d) {
    trace.push_back(v);
    bool done = false;
    for (long k = -d; k <= d; k += 2) {
      long x = (k == -d || (k != d && v[k - 1 + max] < v[k + 1 + max])) ? v[k + 1 + max] : v[k - 1 + max] + 1;
      long y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y;
      v[k + max] = x;
      if (x >= n && y >= m) {
        done = true;
        break;
      }
    }
    if (done) {
      d_end = d;
      break;
    }
  }
  std::vector<Op> ops;
  long x = n, y = m;
  for (long d = d_end; d > 0; --d) {
    const auto& vd = trace[static_cast<size_t>(d)];
    long k = x - y;
    long prev_k = (k == -d || (k != d && vd[k - 1 + max] < vd[k + 1 + max])) ? k + 1 : k - 1;
    long prev_x = vd[prev_k + max], prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) ops.push_back(Op::kKeep), --x, --y;
    ops.push_back(x == prev_x ? Op::kInsert : Op::kDelete);
    x = prev_x, y = prev_y;
  }
  while (x > 0 && y > 0) ops.push_back(Op::kKeep), --x, --y;
  std::reverse(ops.begin(), ops.end());
  return ops;
}

void AppendLine(std::string& out, char tag, std::string_view line) {
  out.push_back(tag);
  out.append(line);
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

// A file name in a ---/+++ header as git writes it, which `patch -p1` and `git apply` both read: a
// name with a quote, a backslash or a control character is C-quoted ("a/x\"y"); a name with a
// space ends with a tab, so that the space is not taken for the end of the name.
std::string HeaderName(std::string_view prefix, std::string_view path) {
  bool quote = false;
  for (char c : path) {
    auto u = static_cast<unsigned char>(c);
    quote |= c == '"' || c == '\\' || u < 0x20 || u == 0x7f;
  }
  std::string name = std::string(prefix) + std::string(path);
  if (!quote) return path.find(' ') != std::string_view::npos ? name + "\t" : name;
  std::string out = "\"";
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[5];
          std::snprintf(buf, sizeof buf, "\\%03o", u);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string UnifiedDiff(std::string_view before, std::string_view after, const std::string& path) {
  if (before == after) return {};
  auto a = Lines(before), b = Lines(after);
  std::vector<Op> ops = Script(a, b);
  // Positions in a and b before each op.
  std::vector<std::pair<size_t, size_t>> pos(ops.size() + 1);
  size_t ia = 0, ib = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    pos[i] = {ia, ib};
    if (ops[i] != Op::kInsert) ++ia;
    if (ops[i] != Op::kDelete) ++ib;
  }
  pos[ops.size()] = {ia, ib};
  std::string out = "--- " + HeaderName("a/", path) + "\n+++ " + HeaderName("b/", path) + "\n";
  const size_t context = 3;
  size_t i = 0;
  while (i < ops.size()) {
    if (ops[i] == Op::kKeep) {
      ++i;
      continue;
    }
    size_t start = i >= context ? i - context : 0;
    size_t end = i;
    // Extend the hunk while changes are within 2*context of each other.
    while (end < ops.size()) {
      if (ops[end] != Op::kKeep) {
        ++end;
        continue;
      }
      size_t run = end;
      while (run < ops.size() && ops[run] == Op::kKeep) ++run;
      if (run == ops.size() || run - end > 2 * context) {
        end = std::min(ops.size(), end + context);
        break;
      }
      end = run;
    }
    size_t a_start = pos[start].first, b_start = pos[start].second;
    size_t a_len = pos[end].first - a_start, b_len = pos[end].second - b_start;
    out += "@@ -" + std::to_string(a_len ? a_start + 1 : a_start) + "," + std::to_string(a_len) + " +" +
           std::to_string(b_len ? b_start + 1 : b_start) + "," + std::to_string(b_len) + " @@\n";
    for (size_t j = start; j < end; ++j) {
      if (ops[j] == Op::kInsert) AppendLine(out, '+', b[pos[j].second]);
      else if (ops[j] == Op::kDelete) AppendLine(out, '-', a[pos[j].first]);
      else AppendLine(out, ' ', a[pos[j].first]);
    }
    i = end;
  }
  return out;
}

}  // namespace portkit
