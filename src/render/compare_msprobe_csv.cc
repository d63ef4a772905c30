// compare_result_msprobe.csv: the rows of a compare in the layout and with the values msprobe 26's
// own compare writes (checked against mindstudio-probe 26.2.0's pt_compare, tests/python/
// test_msprobe.py): torch dtype names, Python's spelling of numbers, the statistics-mode
// differences with relative errors as percent strings, the call's stack on its first row, a row
// for every non-tensor argument and None result, rows of target-only calls named as the dump
// names them, `unsupported` / `Nan` / `N/A` where msprobe writes them.
//
// The rows come from the report; what msprobe also prints of each call (its non-tensor
// arguments, the dump's own statistics, the stack) comes from the operators as the compare read
// them (CompareReport::target_msprobe_ops / reference_msprobe_ops), walked in step with the rows
// (both follow execution order): the dumps are not read again.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>

#include "accuracy/dtype.h"
#include "accuracy/dump.h"
#include "accuracy/msprobe_dump.h"
#include "accuracy/op_spill.h"
#include "core/csv_writer.h"
#include "render/compare_render.h"

namespace portkit::render {
namespace {
using accuracy::CompareReport;
using accuracy::CompareRow;
using accuracy::DumpOp;
using accuracy::DumpScalar;
using accuracy::DumpTensor;
using accuracy::PythonFloatRepr;

const std::string kNa = "N/A";
const std::string kUnsupported = "unsupported";

/// Walks the operators of a dump as the compare read them (CompareReport::target_msprobe_ops)
/// forward to the one with a given manifest index; ops behind are dropped.
class OpCursor {
 public:
  explicit OpCursor(const std::shared_ptr<const accuracy::OpSpill>& ops) {
    if (ops) reader_.emplace(ops->Read());
  }
  /// The operator whose index is `index`, or null (not in the dump, or behind the cursor).
  const DumpOp* At(int64_t index) {
    if (have_ && op_.index == index) return &op_;
    if (have_ && op_.index > index) return nullptr;
    while (reader_) {
      auto more = reader_->Next(op_);
      if (!more.ok() || !*more) {
        reader_.reset();
        have_ = false;
        return nullptr;
      }
      have_ = true;
      if (op_.index == index) return &op_;
      if (op_.index > index) return nullptr;
    }
    return nullptr;
  }

 private:
  std::optional<accuracy::OpSpill::Reader> reader_;
  DumpOp op_;
  bool have_ = false;
};

/// (manifest index, tensor key) of a row side named `name.phase.index.key`: the key starts at the
/// first `.input`, `.output`, `.replay.` or `.*` that follows a component of digits (an operator's
/// name may itself hold `.input_layer`).
std::optional<std::pair<int64_t, std::string>> IndexAndKey(const std::string& side_name) {
  for (size_t at = side_name.find('.'); at != std::string::npos; at = side_name.find('.', at + 1)) {
    const std::string_view rest = std::string_view(side_name).substr(at);
    if (!(rest.starts_with(".input") || rest.starts_with(".output") || rest.starts_with(".replay.") || rest == ".*"))
      continue;
    const size_t dot = at == 0 ? std::string::npos : side_name.rfind('.', at - 1);
    const size_t begin = dot == std::string::npos ? 0 : dot + 1;
    const std::string digits = side_name.substr(begin, at - begin);
    if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    return std::make_pair(static_cast<int64_t>(std::stoll(digits)), side_name.substr(at + 1));
  }
  return std::nullopt;
}

/// A row side as a dump tensor, for a row whose operator cannot be read again.
DumpTensor FromSide(const accuracy::CompareSide& side, const std::string& key) {
  DumpTensor t;
  t.key = key;
  t.dtype = side.dtype.value_or(kNa);
  if (side.shape) t.shape = *side.shape;
  t.requires_grad = side.requires_grad;
  t.data_name = side.data_name;
  return t;
}

/// A Python str's repr: single quotes unless the text holds one and no double quote.
std::string PyStr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(quote)) out += std::string("\\") + quote;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string PyList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + PyStr(items[i]);
  return out + "]";
}

/// float('{:.12f}'.format(v)) as Python prints it: msprobe's format_value.
std::string Round12(double v) {
  if (!std::isfinite(v)) return PythonFloatRepr(v);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.12f", v);
  return PythonFloatRepr(std::strtod(buf, nullptr));
}

std::string Grad(int8_t g) { return g < 0 ? kNa : g ? "True" : "False"; }

/// A statistic as msprobe prints the value dump.json holds.
std::string StatText(double v, bool integral) {
  if (integral && std::isfinite(v) && std::fabs(v) < 9.2e18) return std::to_string(static_cast<long long>(v));
  return PythonFloatRepr(v);
}

// The classes msprobe sorts a statistic into before taking a difference.
enum class ValueClass { kNumber, kNan, kInf, kNegInf, kDevice, kNa, kOther };

ValueClass Classify(const std::string& v, double* number) {
  std::string lower;
  for (char c : v) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "nan" || v == "None") return ValueClass::kNan;
  if (lower == "inf") return ValueClass::kInf;
  if (lower == "-inf") return ValueClass::kNegInf;
  if (lower != "true" && lower != "false" && !v.empty()) {
    char* end = nullptr;
    *number = std::strtod(v.c_str(), &end);
    if (end && *end == '\0') return ValueClass::kNumber;
  }
  if (lower.find("npu") != std::string::npos || lower.find("cpu") != std::string::npos ||
      lower.find("cuda") != std::string::npos)
    return ValueClass::kDevice;
  if (v == kNa) return ValueClass::kNa;
  return ValueClass::kOther;
}

/// msprobe's statistics-mode difference of one statistic: (`<stat> diff`, `<stat>RelativeErr`).
/// Equal texts: "0", "0"; numbers: target − reference and |difference / reference × 100| as a
/// percent string ("inf" when the reference is 0); nan, inf, N/A and other values by its table.
std::pair<std::string, std::string> SummaryDiff(const std::string& npu, const std::string& bench) {
  if (npu == bench) return {"0", "0"};
  double n = 0, b = 0;
  const ValueClass a = Classify(npu, &n), c = Classify(bench, &b);
  using V = ValueClass;
  auto both = [](const std::string& s) { return std::make_pair(s, s); };
  if (a == V::kNa || c == V::kNa) return both(kNa);
  if (a == V::kNumber && c == V::kNumber) {
    const double diff = n - b;
    return {PythonFloatRepr(diff), b == 0 ? "inf" : PythonFloatRepr(std::fabs(diff / b * 100)) + "%"};
  }
  auto numeric = [](V v) { return v == V::kNumber || v == V::kNan || v == V::kInf || v == V::kNegInf; };
  if ((a == V::kNan && numeric(c)) || (c == V::kNan && numeric(a))) return both("Nan");
  if (a == V::kInf && (c == V::kNumber || c == V::kNegInf)) return both("inf");
  if (a == V::kNegInf && (c == V::kNumber || c == V::kInf)) return both("-inf");
  if (a == V::kNumber && c == V::kInf) return both("-inf");
  if (a == V::kNumber && c == V::kNegInf) return both("inf");
  if (a == V::kDevice && c == V::kDevice) return both(kNa);
  if (a == V::kDevice || a == V::kOther || c == V::kDevice || c == V::kOther) return both("Diff");
  return both(kNa);
}

class MsprobeCsv {
 public:
  MsprobeCsv(const CompareReport& report, bool summary, std::vector<std::string> header)
      : report_(report),
        summary_(summary),
        csv_(header),
        target_(report.target_msprobe_ops),
        reference_(report.reference_msprobe_ops) {
    csv_.Reserve(kPieceBytes + 4096);
    // The stack of each call (msprobe's stack.json; a portkit dump's one line per operator). A
    // stack.json that cannot be read leaves the column N/A: the rows do not depend on it.
    if (accuracy::IsMsprobeDump(report.target)) {
      auto stacks = accuracy::LoadMsprobeStacks(report.target);
      if (stacks.ok()) stacks_ = std::move(*stacks);
    }
  }

  Status Row(const CompareRow& r, const ReportSet::Sink& sink) {
    if (r.target.name.empty()) return Status::Ok();  // reference-only: msprobe lists target calls only
    auto where = IndexAndKey(r.target.name);
    // The current call's remaining arguments first: reading on replaces the operator they are of.
    if (current_ && (!where || current_index_ != where->first)) Flush();
    const DumpOp* top = where ? target_.At(where->first) : nullptr;
    if (!top) {  // not among the operators the compare kept: the row as the report has it
      Flush();
      const std::string key = where ? where->second : r.target.name;
      tcall_ = r.target.name.substr(0, r.target.name.size() - key.size() - (key.size() < r.target.name.size()));
      rcall_ = tcall_;
      DumpTensor t = FromSide(r.target, key), b = FromSide(r.reference, key);
      Tensor(t, r.reference.name.empty() ? nullptr : &b, &r);
      return FlushPiece(csv_, sink);
    }
    if (!current_ || current_index_ != top->index) {
      Flush();
      current_ = top, current_index_ = top->index, next_scalar_ = 0, stack_written_ = false;
      tcall_ = CallName(*top, report_.target_calls);
      rop_ = nullptr;
      if (auto rwhere = IndexAndKey(r.reference.name); rwhere && !r.reference.name.empty()) {
        rop_ = reference_.At(rwhere->first);
        rcall_ = rop_ ? CallName(*rop_, report_.reference_calls) : "";
      }
    }
    if (where->second == "*") {  // a call without a counterpart: a row per tensor and argument
      for (size_t j = 0; j < top->tensors.size(); ++j) {
        Scalars(j);
        Tensor(top->tensors[j], Find(rop_, top->tensors[j].key), nullptr);
      }
      Scalars(SIZE_MAX);
      return FlushPiece(csv_, sink);
    }
    for (size_t j = 0; j < top->tensors.size(); ++j) {
      if (top->tensors[j].key != where->second) continue;
      Scalars(j);
      const DumpTensor* bench = r.reference.name.empty() ? nullptr : Find(rop_, IndexAndKey(r.reference.name)->second);
      Tensor(top->tensors[j], bench, &r);
      break;
    }
    return FlushPiece(csv_, sink);
  }

  Status Finish(const ReportSet::Sink& sink) {
    Flush();
    return FlushPiece(csv_, sink, true);
  }

 private:
  static const DumpTensor* Find(const DumpOp* op, const std::string& key) {
    if (!op) return nullptr;
    for (const auto& t : op->tensors)
      if (t.key == key) return &t;
    return nullptr;
  }
  static const DumpScalar* FindScalar(const DumpOp* op, const std::string& key) {
    if (!op) return nullptr;
    for (const auto& s : op->scalars)
      if (s.key == key) return &s;
    return nullptr;
  }
  /// msprobe's call name: the dump's own, else the one compare gave it.
  static std::string CallName(const DumpOp& op, const std::vector<std::string>& calls) {
    if (!op.call.empty()) return op.call;
    if (op.index >= 0 && static_cast<size_t>(op.index) < calls.size()) return calls[static_cast<size_t>(op.index)];
    return op.name + "." + std::to_string(op.index) + "." + op.phase;
  }

  std::string StackCell() {
    if (!current_ || stack_written_) return kNa;
    stack_written_ = true;
    auto it = stacks_.find(current_->call);
    if (it != stacks_.end()) return PyList(it->second);
    if (!current_->stack.empty()) return PyList({current_->stack});
    return kNa;
  }

  /// The rows of the current call's non-tensor arguments listed before its tensor `j`.
  void Scalars(size_t j) {
    while (current_ && next_scalar_ < current_->scalars.size() && current_->scalars[next_scalar_].before <= j)
      Scalar(current_->scalars[next_scalar_++]);
  }
  void Flush() {
    Scalars(SIZE_MAX);
    current_ = nullptr;
  }

  void Scalar(const DumpScalar& s) {
    const DumpScalar* b = FindScalar(rop_, s.key);
    auto type = [](const DumpScalar* x) { return x->type.empty() ? kNa : "<class '" + x->type + "'>"; };
    auto shape = [](const DumpScalar* x) { return x->type.empty() ? kNa : std::string("[]"); };
    std::vector<std::string> cells = {tcall_ + "." + s.key,
                                      b ? rcall_ + "." + b->key : kNa,
                                      type(&s),
                                      b ? type(b) : kNa,
                                      shape(&s),
                                      b ? shape(b) : kNa,
                                      kNa,
                                      kNa};
    if (summary_) {
      std::vector<std::string> rel;
      for (int i = 0; i < 4; ++i) {
        auto [d, r] = b ? SummaryDiff(s.value, b->value) : std::make_pair(kNa, kNa);
        cells.push_back(d), rel.push_back(r);
      }
      cells.insert(cells.end(), rel.begin(), rel.end());
    } else {
      cells.insert(cells.end(), 6, kUnsupported);
    }
    cells.insert(cells.end(), 4, s.value);
    cells.insert(cells.end(), 4, b ? b->value : kNa);
    cells.emplace_back("True");  // N/A on both sides
    cells.emplace_back(!b || b->value == s.value ? "pass" : "warning");
    cells.emplace_back(b ? "" : "No bench data matched.");
    cells.push_back(StackCell());
    if (!summary_) cells.push_back(b ? "['-1', '-1']" : "['-1', 'N/A']");
    csv_.AddRow(cells);
  }

  void Tensor(const DumpTensor& t, const DumpTensor* b, const CompareRow* r) {
    std::vector<std::string> cells = {tcall_ + "." + t.key,
                                      b ? rcall_ + "." + b->key : kNa,
                                      accuracy::TorchDTypeName(t.dtype),
                                      b ? accuracy::TorchDTypeName(b->dtype) : kNa,
                                      accuracy::ShapeText(t.shape),
                                      b ? accuracy::ShapeText(b->shape) : kNa,
                                      Grad(t.requires_grad),
                                      b ? Grad(b->requires_grad) : kNa};
    // The statistics: the dump's own (what msprobe prints), else those compare computed.
    auto stats = [](const DumpTensor* x, const accuracy::CompareSide* side) {
      std::vector<std::string> out;
      if (x && x->has_stats) {
        for (double v : {x->max, x->min, x->mean, x->norm}) out.push_back(StatText(v, x->integral_stats));
      } else if (side && side->stats) {
        for (double v : {side->stats->max, side->stats->min, side->stats->mean, side->stats->norm})
          out.push_back(PythonFloatRepr(v));
      } else {
        out.assign(4, kNa);
      }
      return out;
    };
    std::vector<std::string> npu = stats(&t, r ? &r->target : nullptr);
    std::vector<std::string> bench = b ? stats(b, r ? &r->reference : nullptr) : std::vector<std::string>(4, kNa);
    if (summary_) {
      std::vector<std::string> rel;
      for (int i = 0; i < 4; ++i) {
        auto [d, e] =
            b ? SummaryDiff(npu[static_cast<size_t>(i)], bench[static_cast<size_t>(i)]) : std::make_pair(kNa, kNa);
        cells.push_back(d), rel.push_back(e);
      }
      cells.insert(cells.end(), rel.begin(), rel.end());
    } else {
      DataMetrics(t, b, r, cells);
    }
    cells.insert(cells.end(), npu.begin(), npu.end());
    cells.insert(cells.end(), bench.begin(), bench.end());
    cells.emplace_back(Grad(t.requires_grad) == (b ? Grad(b->requires_grad) : kNa) ? "True" : "False");
    // msprobe's Result: pass / warning / error; here Yes → pass, No → error, Unmatched → warning.
    const accuracy::Verdict v = r ? r->verdict : accuracy::Verdict::kUnmatched;
    cells.emplace_back(v == accuracy::Verdict::kYes         ? "pass"
                       : v == accuracy::Verdict::kNo        ? "error"
                       : v == accuracy::Verdict::kUnmatched ? "warning"
                                                            : "");
    cells.push_back(r ? r->message : b ? "" : "No bench data matched.");
    cells.push_back(StackCell());
    if (!summary_) {
      auto file = [](const DumpTensor* x) { return x->data_name.empty() ? std::string("-1") : x->data_name; };
      cells.push_back("[" + PyStr(file(&t)) + ", " + (b ? PyStr(file(b)) : PyStr(kNa)) + "]");
    }
    csv_.AddRow(cells);
  }

  /// Cosine, EucDist, MaxAbsErr, MaxRelativeErr and the 1‰ / 5‰ ratios as msprobe writes them:
  /// rounded to 12 decimals (a cosine above 0.9999 to 6), EucDist as it is; `unsupported` for a
  /// 0-d or one-element tensor's cosine, distance and ratios and for a call without counterpart,
  /// `Nan` for a metric that has no value (a cosine against all zeros), N/A when not compared.
  void DataMetrics(const DumpTensor& t, const DumpTensor* b, const CompareRow* r, std::vector<std::string>& cells) {
    if (!b) {
      cells.insert(cells.end(), 6, kUnsupported);
      return;
    }
    if (!r || !r->compared) {
      cells.insert(cells.end(), 6, kNa);
      return;
    }
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    // msprobe computes no cosine for a 0-d or one-element tensor, no distance or ratio for a 0-d one.
    const bool zero_d = t.shape.empty(), one_element = zero_d || elements == 1;
    auto metric = [&](const char* name, bool unsupported, bool cosine) -> std::string {
      if (unsupported) return kUnsupported;
      auto it = r->metrics.find(name);
      if (it == r->metrics.end() || std::isnan(it->second)) return "Nan";
      if (std::strcmp(name, "EucDist") == 0) return PythonFloatRepr(it->second);
      std::string text = Round12(it->second);
      if (cosine && std::strtod(text.c_str(), nullptr) > 0.9999) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.6f", std::strtod(text.c_str(), nullptr));
        text = PythonFloatRepr(std::strtod(buf, nullptr));
      }
      return text;
    };
    cells.push_back(metric("Cosine", one_element, true));
    cells.push_back(metric("EucDist", zero_d, false));
    cells.push_back(metric("MaxAbsErr", false, false));
    cells.push_back(metric("MaxRelativeErr", false, false));
    cells.push_back(metric("One Thousandth Err Ratio", zero_d, false));
    cells.push_back(metric("Five Thousandths Err Ratio", zero_d, false));
  }

  const CompareReport& report_;
  const bool summary_;
  CsvWriter csv_;
  OpCursor target_, reference_;
  std::map<std::string, std::vector<std::string>> stacks_;
  const DumpOp* current_ = nullptr;
  int64_t current_index_ = -1;
  const DumpOp* rop_ = nullptr;
  std::string tcall_, rcall_;
  size_t next_scalar_ = 0;
  bool stack_written_ = false;
};

}  // namespace

std::string CompareMsprobeCsv(const CompareReport& report) {
  return Collect([&](const ReportSet::Sink& sink) { return CompareMsprobeCsvTo(report, sink); });
}

Status CompareMsprobeCsvTo(const CompareReport& report, const ReportSet::Sink& sink) {
  // msprobe 26's columns (msprobe/core/common/const.py): real-data mode, or summary mode when no
  // row was compared from tensor data but some from statistics.
  bool any_data = false, any_stats = false;
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const accuracy::CompareRow& r) {
    any_data = any_data || r.compared, any_stats = any_stats || r.from_statistics;
    return Status::Ok();
  }));
  const bool summary = !any_data && any_stats;
  std::vector<std::string> header = {"NPU Name",          "Bench Name",         "NPU Dtype",
                                     "Bench Dtype",       "NPU Tensor Shape",   "Bench Tensor Shape",
                                     "NPU Requires_grad", "Bench Requires_grad"};
  static const char* const kData[] = {
      "Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"};
  static const char* const kSummary[] = {"Max diff",       "Min diff",       "Mean diff",       "L2norm diff",
                                         "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"};
  if (summary) header.insert(header.end(), std::begin(kSummary), std::end(kSummary));
  else header.insert(header.end(), std::begin(kData), std::end(kData));
  for (const char* c : {"NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
                        "Bench l2norm", "Requires_grad Consistent", "Result", "Err_message", "NPU_Stack_Info"})
    header.emplace_back(c);
  if (!summary) header.emplace_back("Data_name");
  MsprobeCsv out(report, summary, header);
  PORTKIT_RETURN_IF_ERROR(report.ForEachRow([&](const CompareRow& r) { return out.Row(r, sink); }));
  return out.Finish(sink);
}

}  // namespace portkit::render
