// The query API over an imported profile (api.h, "query"): typed rows for library callers, `prof
// query` and the Python companion. Events are streamed from the store one row at a time; the
// per-operator and step tables reuse the advisor's profile (Profile::Load, HostOpTable), as
// `prof export summary` and `prof analyse` do.
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <regex>
#include <tuple>
#include <unordered_map>

#include "prof/api.h"

namespace portkit::prof {
namespace fs = std::filesystem;
namespace {

/// "?, ?, ?" for `n` parameters.
std::string Placeholders(size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += i ? ", ?" : "?";
  return out;
}

/// An integer argument of a collective (Kineto writes numbers; some writers quote them); -1 when
/// absent or not an integer.
int64_t IntArg(simdjson::dom::object args, const char* key) {
  simdjson::dom::element v;
  if (args[key].get(v)) return -1;
  int64_t i;
  if (!v.get_int64().get(i)) return i;
  uint64_t u;
  if (!v.get_uint64().get(u)) return u > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(u);
  std::string_view s;
  if (!v.get_string().get(s) && !s.empty() && s.size() < 19 &&
      std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::stoll(std::string(s));
  return -1;
}

std::string StringArg(simdjson::dom::object args, const char* key) {
  std::string_view s;
  if (args[key].get_string().get(s)) return "";
  return std::string(s);
}

/// The regular expression of EventFilter::name_regex (none when empty).
Expected<std::optional<std::regex>> NamePattern(const std::string& text) {
  if (text.empty()) return std::optional<std::regex>();
  try {
    return std::optional<std::regex>(std::regex(text, std::regex::ECMAScript | std::regex::optimize));
  } catch (const std::regex_error& e) {
    return InvalidArgument("'" + text + "' is not a regular expression (" + e.what() + ")");
  }
}

/// Keeps the rows whose name passes `filter` (names, name_regex), at most its limit.
template <typename Row>
Status KeepMatching(const EventFilter& filter, std::vector<Row>* rows) {
  auto pattern = NamePattern(filter.name_regex);
  if (!pattern.ok()) return pattern.status();
  auto drop = [&](const Row& r) {
    if (!filter.names.empty() && std::find(filter.names.begin(), filter.names.end(), r.name) == filter.names.end())
      return true;
    return *pattern && !std::regex_search(r.name, **pattern);
  };
  rows->erase(std::remove_if(rows->begin(), rows->end(), drop), rows->end());
  if (filter.limit > 0 && rows->size() > filter.limit) rows->resize(filter.limit);
  return Status::Ok();
}

}  // namespace

ProfileQuery::ProfileQuery(ProfileQuery&&) noexcept = default;
ProfileQuery::~ProfileQuery() = default;

const StoreReadNotes& ProfileQuery::left_out() const { return store_->read_notes(); }

const std::string& ProfileQuery::TracePath(int64_t id) const {
  static const std::string kNone;
  auto it = std::lower_bound(trace_paths_.begin(), trace_paths_.end(), id,
                             [](const std::pair<int64_t, std::string>& t, int64_t v) { return t.first < v; });
  return it != trace_paths_.end() && it->first == id ? it->second : kNone;
}

Expected<ProfileQuery> OpenProfile(const QueryOptions& options) {
  std::error_code ec;
  if (!fs::exists(options.dir, ec)) return NotFound(options.dir.string() + " does not exist");
  ProfileQuery q;
  q.options_ = options;
  q.folder_ = ProfileFolder(options.dir);
  q.database_ = StorePath(options.dir);
  if (!fs::exists(q.database_, ec))
    return NotFound(q.folder_.string() + " is not an imported profile (it holds no " + std::string(kStoreFileName) +
                    "); run `portkit prof import -dir " + options.dir.string() + "` first");
  StoreReadOptions read;
  read.max_value_bytes = options.max_string_bytes;
  auto store = Store::OpenForReading(q.database_, read);
  if (!store.ok()) return store.status();
  q.store_ = std::make_unique<Store>(std::move(*store));
  q.warnings_ = UnfinishedImportWarnings(q.folder_);
  if (std::string w = q.store_->read_notes().Warning(q.database_.string()); !w.empty())
    q.warnings_.push_back(std::move(w));
  PORTKIT_RETURN_IF_ERROR(sql::ForEachRow(
      q.store_->db(), "SELECT id, path FROM traces ORDER BY id",
      [&](const sql::Statement& row) { q.trace_paths_.emplace_back(row.Int(0), std::string(row.Text(1))); }));
  return q;
}

Status ProfileQuery::ForEachEvent(const EventFilter& filter, const std::function<Status(const EventRow&)>& visit) {
  auto compiled = NamePattern(filter.name_regex);
  if (!compiled.ok()) return compiled.status();
  const std::optional<std::regex>& pattern = *compiled;
  std::string where;
  if (!filter.kinds.empty()) where += " AND e.kind IN (" + Placeholders(filter.kinds.size()) + ")";
  if (!filter.names.empty()) where += " AND s.value IN (" + Placeholders(filter.names.size()) + ")";
  const std::string sql =
      "SELECT e.trace, e.kind, e.name, s.value, COALESCE(c.value, ''), e.pid, e.tid, e.ts, e.dur, "
      "COALESCE(e.correlation, -1), COALESCE(e.external_id, -1), e.input_dims, COALESCE(e.input_types, ''), " +
      std::string(filter.with_args ? "COALESCE(e.args, '')" : "''") +
      " FROM events e JOIN strings s ON s.id = e.name LEFT JOIN strings c ON c.id = e.category WHERE 1" + where +
      " ORDER BY e.trace, e.pid, e.tid, e.ts, e.dur DESC, e.rowid";
  auto st = store_->db().Prepare(sql);
  if (!st.ok())
    return ParseError(database_.string() + ": not a portkit profile database (" + st.status().message() + ")");
  int param = 1;
  for (const auto& k : filter.kinds) st->Bind(param++, k);
  for (const auto& n : filter.names) st->Bind(param++, n);
  // The regex is tried once per distinct name (names are interned in the store).
  std::unordered_map<int64_t, bool> matches;
  uint64_t rows = 0;
  EventRow r;
  while (filter.limit == 0 || rows < filter.limit) {
    auto more = st->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    r.name = st->Text(3);
    if (pattern) {
      auto [it, fresh] = matches.try_emplace(st->Int(2), false);
      if (fresh) it->second = std::regex_search(r.name.begin(), r.name.end(), *pattern);
      if (!it->second) continue;
    }
    r.trace = TracePath(st->Int(0));
    r.kind = st->Text(1);
    r.category = st->Text(4);
    r.pid = st->Int(5);
    r.tid = st->Int(6);
    r.ts_ns = st->Int(7);
    r.dur_ns = st->Int(8);
    r.correlation = st->Int(9);
    r.external_id = st->Int(10);
    r.has_input_dims = !st->IsNull(11);
    r.input_dims = r.has_input_dims ? st->Text(11) : std::string_view();
    r.input_types = st->Text(12);
    r.args = st->Text(13);
    ++rows;
    PORTKIT_RETURN_IF_ERROR(visit(r));
  }
  return Status::Ok();
}

Expected<const Profile*> ProfileQuery::LoadProfile() {
  if (!profile_) {
    auto p = Profile::Load(*store_, options_.data_dir, options_.target);
    if (!p.ok()) return p.status();
    profile_ = std::make_unique<Profile>(std::move(*p));
  }
  return profile_.get();
}

Expected<std::vector<OpRow>> ProfileQuery::Ops(const EventFilter& filter, bool by_shape) {
  auto p = LoadProfile();
  if (!p.ok()) return p.status();
  std::vector<OpRow> out;
  for (auto& r : HostOpTable(**p, by_shape))
    out.push_back({std::move(r.name), std::move(r.input_dims), r.count, r.self_ns, r.total_ns});
  PORTKIT_RETURN_IF_ERROR(KeepMatching(filter, &out));
  return out;
}

Expected<std::vector<StepRow>> ProfileQuery::Steps(const EventFilter& filter) {
  auto p = LoadProfile();
  if (!p.ok()) return p.status();
  std::vector<StepRow> out;
  auto add = [&](const Profile::Step& s, bool warmup) {
    StepRow r;
    r.trace = TracePath(s.trace);
    r.name = s.name;
    if (size_t hash = s.name.rfind('#'); hash != std::string::npos && hash + 1 < s.name.size() &&
                                         s.name.size() - hash - 1 < 19 &&
                                         std::all_of(s.name.begin() + static_cast<std::ptrdiff_t>(hash) + 1,
                                                     s.name.end(), [](char c) { return c >= '0' && c <= '9'; }))
      r.number = std::stoll(s.name.substr(hash + 1));
    r.start_ns = s.start;
    r.end_ns = s.end;
    r.warmup = warmup;
    out.push_back(std::move(r));
  };
  for (const auto& s : (*p)->steps) add(s, false);
  for (const auto& s : (*p)->warmup) add(s, true);
  std::sort(out.begin(), out.end(), [](const StepRow& a, const StepRow& b) {
    return std::tie(a.trace, a.start_ns, a.name) < std::tie(b.trace, b.start_ns, b.name);
  });
  PORTKIT_RETURN_IF_ERROR(KeepMatching(filter, &out));
  return out;
}

Expected<std::vector<CommRow>> ProfileQuery::Comm(const EventFilter& filter) {
  // Communication is the advisor's (Profile::IsCommunication): the generic names and the target's.
  // Without data folders (a caller that has none), the generic names alone.
  Profile classes;
  if (!options_.data_dir.dirs().empty()) {
    auto facts = target::LoadTarget(options_.data_dir, options_.target);
    if (!facts.ok()) return facts.status();
    classes.target = std::move(*facts);
  }
  std::vector<CommRow> out;
  simdjson::dom::parser parser;
  EventFilter kernels;
  kernels.kinds = {EventKindName(EventKind::kKernel)};
  kernels.names = filter.names;
  kernels.name_regex = filter.name_regex;
  kernels.with_args = true;
  std::string name;
  PORTKIT_RETURN_IF_ERROR(ForEachEvent(kernels, [&](const EventRow& e) {
    name.assign(e.name);
    if (!classes.IsCommunication(name)) return Status::Ok();
    CommRow r;
    r.trace = std::string(e.trace);
    r.name = name;
    r.device = e.pid, r.stream = e.tid, r.ts_ns = e.ts_ns, r.dur_ns = e.dur_ns;
    simdjson::dom::object args;
    if (!e.args.empty() && !parser.parse(simdjson::padded_string(e.args)).get_object().get(args)) {
      r.collective = StringArg(args, "Collective name");
      r.group = StringArg(args, "Process Group Name");
      r.dtype = StringArg(args, "dtype");
      r.in_nelems = IntArg(args, "In msg nelems");
      r.out_nelems = IntArg(args, "Out msg nelems");
      r.group_size = IntArg(args, "Group size");
    }
    out.push_back(std::move(r));
    return Status::Ok();
  }));
  if (filter.limit > 0 && out.size() > filter.limit) out.resize(filter.limit);
  return out;
}

}  // namespace portkit::prof
