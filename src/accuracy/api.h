#pragma once
/// The accuracy engine as a library: compare two operator dumps, list the operators that
/// overflow, convert dump tensors to .npy / .txt, and copy selected operators into a new dump.
/// Each entry point takes its options and a Context and returns a report; it never reads argv,
/// writes to stdout or chooses an exit code. Progress goes to `ctx.logger`; everything a caller
/// may want to act on (rows, verdicts, skipped tensors, read errors) is in the report. The
/// command-line layer is src/cli/{compare,overflow,convert,extract}.cc, the renderers
/// src/render/compare_*.cc and src/render/dump_tools_render.cc.
///
/// Errors: a Status (kNotFound for a missing dump, kParse for a corrupt manifest, mapping file or
/// HDF5 file, kInvalidArgument for a selection that matches nothing, kIo for an output that cannot
/// be written) when the run cannot produce its report; problems with single tensors or files of a
/// larger input are listed in the report instead, and the run goes on.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/context.h"
#include "core/status.h"

namespace portkit::accuracy {

// ---------------------------------------------------------------------------------------------
// compare

/// How operators of the two runs are paired.
enum class MatchKey {
  kName,          ///< name and phase
  kNameAndShape,  ///< name, phase and output shapes (default)
};
/// "name" / "name+shape".
std::string_view MatchKeyName(MatchKey key);

struct CompareOptions {
  std::filesystem::path reference;  ///< dump folder of the reference run
  std::filesystem::path target;     ///< dump folder of the target run
  /// `target_op,reference_op` a line: target operator names are renamed before matching. Empty:
  /// none.
  std::filesystem::path mapping;
  MatchKey match = MatchKey::kNameAndShape;
  int jobs = 0;  ///< worker threads; <= 0: ctx.jobs, and when that is <= 0 one per core
  /// Work bound of the operator alignment (steps of Myers' diff; 0: the default, about a minute of
  /// work). Within it the alignment is an exact longest common subsequence; see
  /// CompareReport::unaligned_target_ops.
  uint64_t align_budget = 0;
  /// Fill CompareReport::target_calls / reference_calls / target_stacks (for msprobe's layout).
  bool msprobe_names = false;
  /// Elements a tensor file's view may read when it reads elements of its storage more than once
  /// (a stride of 0, overlapping strides: a header of a few bytes can claim 2^50 of them); such a
  /// tensor beyond it is a read error of its row ("over the limit"). 0: no cap. Tensors whose
  /// elements are distinct cost work in proportion to their file and need no cap.
  uint64_t max_view_elements = uint64_t{1} << 26;
  /// Bytes one call of an msprobe dump.json may take (it is read one call at a time); a larger
  /// one is an error ("over the limit"). 0: no cap.
  uint64_t max_call_bytes = uint64_t{64} << 20;
  /// A folder for the rows while the run goes on: when set, each batch of finished rows is written
  /// to an unnamed temporary file there (gone when the report is, or when the process dies) and
  /// CompareReport::rows stays empty; CompareReport::ForEachRow reads them back. Memory is then that
  /// of one batch (a few thousand rows), not of every row (~0.8 KB each: 900k rows of a 300k-call
  /// dump compared against itself). Empty: every row is kept in CompareReport::rows.
  std::filesystem::path spill_dir;
};

/// A row's judgement (the CSV's `Accuracy Reached or Not`).
enum class Verdict {
  kYes,            ///< within the accuracy criteria
  kNo,             ///< outside them
  kNotApplicable,  ///< nothing to judge: an element type that is not compared (`message` says which)
  kUnmatched,      ///< no counterpart, another shape, or data that could not be read
};
/// "Yes" / "No" / "N/A" / "Unmatched".
std::string_view VerdictName(Verdict verdict);

struct TensorStatistics {
  double max = 0, min = 0, mean = 0, norm = 0;
};

/// A row's metric values by name, iterated in name order like a std::map<std::string, double>,
/// held inline (no allocation: a compare of 100k tensors keeps 200k rows): the names are the fixed
/// set of MetricValues::kNames (every metric of src/accuracy/metrics/ and the statistics-only
/// differences).
class MetricValues {
 public:
  using value_type = std::pair<std::string_view, double>;
  /// Every name a row can hold, in name order (std::string's order).
  static constexpr std::string_view kNames[] = {"Cosine",
                                                "EucDist",
                                                "Five Thousandths Err Ratio",
                                                "KLDivergence",
                                                "MaxAbsErr",
                                                "MaxRelDiff",
                                                "MaxRelativeErr",
                                                "MaxULPErr",
                                                "MeanAbsErr",
                                                "MeanRelDiff",
                                                "MeanRelErr",
                                                "MinRelDiff",
                                                "NormRelDiff",
                                                "One Thousandth Err Ratio",
                                                "RMSE",
                                                "SmallValueErrRatio",
                                                "StatsRelDiff"};
  static constexpr int kCount = static_cast<int>(std::size(kNames));

  class const_iterator {
   public:
    struct Arrow {
      value_type v;
      const value_type* operator->() const { return &v; }
    };
    const_iterator(const MetricValues* m, int i) : m_(m), i_(i) { Skip(); }
    value_type operator*() const { return {kNames[i_], m_->values_[i_]}; }
    Arrow operator->() const { return {**this}; }
    const_iterator& operator++() {
      ++i_;
      Skip();
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    void Skip() {
      while (i_ < kCount && !(m_->present_ & (1u << i_))) ++i_;
    }
    const MetricValues* m_;
    int i_;
  };

  /// The value of `name`, inserted as 0 when absent. `name` must be one of kNames (a programming
  /// error otherwise: std::invalid_argument).
  double& operator[](std::string_view name);
  /// The value of `name`; std::out_of_range when absent.
  const double& at(std::string_view name) const;
  const_iterator find(std::string_view name) const;
  size_t count(std::string_view name) const { return find(name) == end() ? 0 : 1; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, kCount}; }
  bool empty() const { return present_ == 0; }

 private:
  static int IndexOf(std::string_view name);
  double values_[kCount] = {};
  uint32_t present_ = 0;
};

/// One side (target or reference) of a row.
struct CompareSide {
  /// `op.phase.index.key`, with key `*` for a whole operator; empty when this side has none.
  std::string name;
  std::optional<std::string> dtype;  ///< safetensors element type name
  std::optional<std::vector<int64_t>> shape;
  std::optional<TensorStatistics> stats;  ///< from the data, or from a stats-only manifest
  int8_t requires_grad = -1;              ///< from msprobe dumps: 1 / 0; -1 unknown
  std::string data_name;                  ///< msprobe tensor-mode data file, when the dump names one
};

/// One tensor pair (or one operator without a counterpart).
struct CompareRow {
  CompareSide target, reference;
  Verdict verdict = Verdict::kUnmatched;
  std::string message;  ///< the CSV's `Err_message`: why not compared, or a note on the data
  /// Metrics computed from the tensor data (then `metrics` holds every metric by name: Cosine,
  /// EucDist, MaxAbsErr, MaxRelativeErr, One Thousandth Err Ratio, Five Thousandths Err Ratio,
  /// RMSE, MeanAbsErr, MeanRelErr, KLDivergence, MaxULPErr, SmallValueErrRatio).
  bool compared = false;
  MetricValues metrics;
  uint64_t identical_nonfinite = 0;     ///< positions holding the same inf/nan in both (left out)
  std::optional<double> ulp_threshold;  ///< the target type's ULP tolerance, for clean compared rows
  uint64_t elements = 0;                ///< elements compared (rows with `compared`)
  uint64_t mismatched_elements = 0;     ///< integer tensors: elements that differ (compared exactly)
  /// Stats-only rows (no tensor data in a dump): judged from the statistics, whose relative
  /// differences are in `metrics` (MaxRelDiff, MinRelDiff, MeanRelDiff, NormRelDiff, StatsRelDiff:
  /// the largest); `compared` stays false.
  bool from_statistics = false;
  /// An integer or bool output of an operator with floating inputs (argmax, pooling indices,
  /// comparisons): it flips on ties and rounding, so it is not used to locate the culprit.
  bool discrete = false;
  /// An output that is zero up to rounding noise in both runs (e.g. a gradient that cancels out):
  /// judged by its absolute error against the scale of the operator's inputs, not by cosine.
  bool negligible = false;
  long target_op = -1;      ///< position of the target operator in the target dump
  long reference_op = -1;   ///< position of the reference operator in the reference dump
  bool output = false;      ///< an output tensor (or a replayed output)
  bool replay = false;      ///< the target op's output recomputed from reference inputs
  bool read_error = false;  ///< the tensor data could not be read (`message` says why)
};

/// An operator of a dump, as reports name it.
struct CompareOp {
  int64_t index = 0;  ///< the manifest index
  std::string name, phase, module, stack;
  /// A backward operator: the forward operator it derives from (DumpOp::forward), else empty.
  std::string forward;
};

/// An operator matched by name and phase whose output shapes differ between the runs.
struct ShapeChange {
  CompareOp target, reference;
  std::vector<std::vector<int64_t>> target_shapes, reference_shapes;  ///< output shapes
};

class RowSpill;
class OpSpill;

/// The report's conclusion.
enum class DivergenceState {
  kNone,     ///< no output diverges beyond rounding
  kDrift,    ///< error beyond rounding that ordinary rounding may still explain: replay localises it
  kCulprit,  ///< a localised culprit (CompareReport::first_divergence)
};
/// "none" / "drift" / "culprit".
std::string_view DivergenceStateName(DivergenceState state);

struct CompareReport {
  std::string reference, target;  ///< the dump folders as given
  MatchKey match = MatchKey::kNameAndShape;
  /// In execution order: the tensor rows of each matched operator, with the operators that have
  /// no counterpart (a row each, `*` for the key) where they ran: a target-only operator before
  /// the next matched one of the target, a reference-only one before the next matched one of the
  /// reference. An operator whose output shapes changed is one row naming both.
  /// Empty when the rows were spilled (CompareOptions::spill_dir): read them with ForEachRow.
  std::vector<CompareRow> rows;
  size_t row_count = 0;  ///< rows in all, kept or spilled
  /// The spilled rows (null when they are in `rows`); shared by copies of the report.
  std::shared_ptr<const RowSpill> spill;
  /// The earliest target operator whose own error crosses the threshold, and the basis of that
  /// judgement: "replay" (a replayed output, computed from the reference's inputs, is No, or under
  /// 60 % of its elements are within one rounding's relative tolerance: the 1‰ ratio, 5‰ for
  /// bf16/fp8),
  /// "inputs matched" (an output is No while every compared input is Yes), "error growth" (an
  /// output's error jumps against its inputs' error: the One Thousandth Err Ratio falls from above
  /// 0.9 to below 0.6 or by more than 0.1, the cosine falls by more than 0.1, or the largest
  /// absolute error grows by an order of magnitude beyond 1), "statistics growth" (stats-only
  /// dumps: an output statistic differs by more than 10 % while the inputs' differ by less than
  /// 1 %) or "outputs only" (an output is No and no inputs were compared). Replay decides for every
  /// operator that has replayed outputs. Empty basis: none.
  std::optional<CompareOp> first_divergence;
  std::string first_divergence_basis;
  long first_divergence_op = -1;  ///< its position in the target dump (rows' target_op), -1 when none
  /// The numbers behind it, e.g. `output.0 One Thousandth Err Ratio 0.41 (inputs 1)`.
  std::string first_divergence_evidence;
  /// The earliest target operator with any output judged No (possibly inherited error).
  std::optional<CompareOp> first_mismatching_output;
  /// Which of three states holds: a localised culprit (first_divergence), precision drift that
  /// cannot be localised without replay (drift_start), or no divergence.
  DivergenceState divergence_state = DivergenceState::kNone;
  /// With kDrift: the earliest operator whose outputs' error exceeds what rounding and its inputs'
  /// error allow (or, when none does, the first output judged No), and the numbers behind it.
  std::optional<CompareOp> drift_start;
  std::string drift_evidence;
  std::vector<CompareOp> unmatched_target_ops, unmatched_reference_ops;  ///< in execution order
  std::vector<ShapeChange> shape_changes;  ///< with --match name+shape, in execution order
  /// Operators left unmatched because aligning them exactly exceeded the work bound (0 unless the
  /// runs differ in hundreds of thousands of operators); a warning says so too.
  size_t unaligned_target_ops = 0, unaligned_reference_ops = 0;
  /// Rows whose tensor data could not be read: index into the rows (ForEachRow's order) and the
  /// message.
  std::vector<std::pair<size_t, std::string>> read_errors;
  /// The name of the first of them (its target's, or its reference's when it has no target).
  std::string first_read_error_name;
  std::vector<std::string> warnings;  ///< about the dumps (e.g. an incomplete last manifest line)
  size_t target_ops = 0, reference_ops = 0, matched_ops = 0, renames = 0;
  size_t tensor_pairs_compared = 0;              ///< rows whose metrics were computed from data
  size_t replay_ok = 0, replay_skipped = 0;      ///< replayed operators of the target dump
  std::map<std::string, size_t> verdict_counts;  ///< by VerdictName
  /// Per operator position of each dump: msprobe's call name (`Functional.linear.0.forward`, or for
  /// a portkit dump `aten::addmm.3.forward`: the name, its occurrence in that phase, the phase), and
  /// the target's stacks; for the msprobe layout (render::CompareMsprobeCsv). Filled only with
  /// CompareOptions::msprobe_names.
  std::vector<std::string> target_calls, reference_calls, target_stacks;
  /// Per operator position of each dump, for the msprobe layout: the operator as the compare read
  /// it (its call, tensors with the dump's own statistics, requires_grad and data file, non-tensor
  /// arguments, stack; not its module, file or forward), so the renderer need not read the dumps
  /// again; in a temporary file beside the spilled rows, else in memory (accuracy/op_spill.h).
  /// Set only with CompareOptions::msprobe_names.
  std::shared_ptr<const OpSpill> target_msprobe_ops, reference_msprobe_ops;
  /// Per target operator position: the forward operator a backward operator derives from
  /// (DumpOp::forward; empty for the others); for the rows of the reports.
  std::vector<std::string> target_forward;
  /// target_forward of a row's target operator ("" when none).
  const std::string& TargetForward(const CompareRow& row) const;

  /// Whether any row is judged No.
  bool HasMismatch() const;
  /// Calls `fn` with every row in order (those of `rows`, or the spilled ones read back one at a
  /// time); stops at the first error of `fn`, or of reading the spill file (kIo), and returns it.
  Status ForEachRow(const std::function<Status(const CompareRow&)>& fn) const;
};

/// Loads both dumps, pairs operators and tensors, computes the metrics on `jobs` threads (results
/// do not depend on the thread count) and judges every pair.
Expected<CompareReport> RunCompare(const CompareOptions& options, Context& ctx);

// ---------------------------------------------------------------------------------------------
// overflow

struct OverflowOptions {
  std::filesystem::path dump;
};

struct OverflowOp {
  int64_t index = 0;
  std::string name, phase, module, stack;
  /// Why it counts: "flagged by the dumper", or "<key>: inf or nan", or "<key>: beyond the fp16
  /// range" (the first reason found).
  std::string reason;
  /// A creation or fill operator (full, masked_fill, empty, ...): its inf is a value it was asked
  /// to write (an attention mask) or memory that was never data, not an overflow of a computation.
  bool deliberate = false;
  /// Its only non-finite values are -inf in outputs and in an input: a mask passed along (triu,
  /// add, expand of a -inf mask), not a new overflow.
  bool mask = false;
};

struct OverflowReport {
  std::string dump;                     ///< as given
  size_t operators = 0;                 ///< operators in the dump
  std::vector<OverflowOp> overflowing;  ///< in execution order
  /// Whether any overflowing operator is neither `deliberate` nor a `mask` carrier (the
  /// --fail-on-overflow gate).
  bool HasComputedOverflow() const;
  /// Where the inf/nan comes from: the first operator whose output holds inf or nan while every
  /// floating input it was given is finite. Operators that write such values on purpose are not
  /// counted: creation and fill operators (empty*, full*, fill_, masked_fill, index_fill, where
  /// with a scalar, scalar_tensor...), whose inf is a mask value and whose empty memory is not
  /// data. Absent when no operator qualifies.
  std::optional<OverflowOp> origin;
  /// How the origin was found: "finite inputs", or "inputs not dumped" (a dump without inputs:
  /// the first computing operator with a nan or +inf output; -inf alone is taken for a mask).
  std::string origin_basis;
  std::vector<std::string> warnings;
};

/// Operators whose outputs hold inf/nan (or exceed fp16's range in an fp16 tensor), or that the
/// dumper flagged as overflowing, and the origin of the first inf/nan (src/accuracy/overflow.cc).
Expected<OverflowReport> RunOverflow(const OverflowOptions& options, Context& ctx);

// ---------------------------------------------------------------------------------------------
// convert

enum class ConvertType { kNpy, kTxt };
/// "npy" / "txt".
std::string_view ConvertTypeName(ConvertType type);

struct ConvertOptions {
  /// A dump folder (manifest.jsonl), one .safetensors file, one HDF5 file, or a folder of HDF5
  /// files (each converted into its own subfolder).
  std::filesystem::path input;
  std::filesystem::path output;  ///< folder; created when missing
  ConvertType type = ConvertType::kNpy;
  /// Replace files of the names convert makes that portkit did not write (core/output_policy.h);
  /// without it such a file is listed in `failed` and kept.
  bool force = false;
  /// An HDF5 dataset whose elements its file does not hold (chunks never written, more than
  /// kMaxHdf5Expansion times its stored bytes) is refused past this many elements (0: no cap).
  uint64_t max_view_elements = uint64_t{1} << 26;
};

struct ConvertedFile {
  std::string file;      ///< path relative to the output folder
  std::string source;    ///< input file and tensor (HDF5 path or safetensors key)
  bool widened = false;  ///< bf16/fp8 written as float32 (.npy)
};

/// Something that could not be converted.
struct ConvertProblem {
  std::string message;  ///< names the file and the tensor
  ErrorCode code = ErrorCode::kParse;
};

struct ConvertReport {
  std::string input, output;  ///< as given
  ConvertType type = ConvertType::kNpy;
  std::vector<ConvertedFile> written;    ///< in the order written (index files not included)
  std::vector<std::string> index_files;  ///< convert_index.csv of each HDF5 file
  size_t widened = 0;
  /// HDF5 objects outside the layout convention, skipped by design (notes, not errors).
  std::vector<std::string> skipped;
  /// Tensors or whole input files that could not be converted; the rest was converted.
  std::vector<ConvertProblem> failed;
  size_t input_files = 0;         ///< tensor files (safetensors / HDF5) read
  size_t input_files_failed = 0;  ///< of which could not be read at all
};

/// Converts every tensor of the input. A corrupt HDF5 file that crashes the HDF5 library is read
/// in a child process and listed in `failed`; the other files are still converted.
Expected<ConvertReport> RunConvert(const ConvertOptions& options, Context& ctx);

// ---------------------------------------------------------------------------------------------
// extract

struct ExtractOptions {
  std::filesystem::path input;   ///< a dump folder, or an HDF5 file
  std::filesystem::path output;  ///< the new dump folder, or the new HDF5 file
  /// Dump: operator indices (exact) or parts of operator names. HDF5: `/op_name` or
  /// `/op_name/seqid` (exact; the leading '/' may be left out).
  std::vector<std::string> select;
  /// Replace an existing output (a non-empty folder or an existing .h5 file). Without it an
  /// existing dump folder is refused (kInvalidArgument), and an existing HDF5 output file is
  /// appended to, as repeated `h5copy` runs do. The input itself is never an output.
  bool force = false;
  /// HDF5 only: where each selected object goes in the output (h5copy's `-d`), one per `select`
  /// entry; empty: the same path as in the input.
  std::vector<std::string> destination;
};

struct ExtractReport {
  std::string input, output;  ///< as given
  bool hdf5 = false;
  /// Dump: the operators kept (`name.phase.index`). HDF5: the group paths copied.
  std::vector<std::string> extracted;
  std::vector<std::string> missing;  ///< selections that match nothing in the input
  std::vector<std::string> covered;  ///< HDF5: selections inside another selected operator
  std::vector<std::string> files;    ///< files written (dump: relative to the output folder)
  std::vector<std::string> warnings;
  bool appended = false;  ///< HDF5: copied into the existing output file
};

/// Copies the selected operators. Nothing selected at all is kInvalidArgument and writes nothing;
/// selections that match nothing while others do are listed in `missing`.
Expected<ExtractReport> RunExtract(const ExtractOptions& options, Context& ctx);

/// True when `input` would be extracted as HDF5 (a file with the HDF5 extension or signature).
bool IsHdf5Input(const std::filesystem::path& input);

}  // namespace portkit::accuracy
