// A pickle interpreter for one saved tensor (see torch_pickle.h). Opcodes follow CPython's
// Lib/pickletools.py; the tensor's reduce call follows torch.Tensor.__reduce_ex__:
// `_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[,
// metadata])`, the storage a persistent id `('storage', torch.FloatStorage, '0', 'cpu', numel)`.
// Values live in one arena and are referred to by index, so the memo, DUP and lists that hold
// themselves share them as Python would, without copies or recursion; the work is linear in the
// pickle's length.
#include "accuracy/torch_pickle.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <unordered_map>

namespace portkit::accuracy {
namespace {

enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
enum class Callable : uint8_t {
  kNone,
  kRebuildTensor,
  kRebuildTensorV3,
  kRebuildParameter,
  kOrderedDict,
  kStorageType,
  kUntypedStorage,
  kDType
};

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kNone: return "None";
    case Kind::kBool: return "a bool";
    case Kind::kInt: return "an int";
    case Kind::kFloat: return "a float";
    case Kind::kString: return "a string";
    case Kind::kTuple: return "a tuple";
    case Kind::kList: return "a list";
    case Kind::kDict: return "a dict";
    case Kind::kGlobal: return "a class or function";
    case Kind::kStorage: return "a storage";
    case Kind::kTensor: return "a tensor";
  }
  return "?";
}

struct Value {
  Kind kind = Kind::kNone;
  Callable callable = Callable::kNone;  ///< kGlobal
  int64_t i = 0;                        ///< kInt, kBool; the index into storages / tensors for kStorage / kTensor
  double f = 0;                         ///< kFloat
  std::string s;                        ///< kString; kGlobal: `module.name`
  std::vector<uint32_t> items;          ///< kTuple, kList; kDict: key, value, key, value, ...
};

struct Storage {
  std::string type, key;
  DType dtype = DType::kUnknown;
  uint64_t numel = 0;    ///< elements of `dtype`; bytes when `untyped`
  bool untyped = false;  ///< torch.storage.UntypedStorage (the element type comes with the tensor)
};

/// torch's dtype names (`torch.float8_e4m3fn`), as _rebuild_tensor_v3 gets them.
DType DTypeOfTorchName(std::string_view name) {
  static constexpr std::pair<std::string_view, DType> kNames[] = {{"float64", DType::kF64},
                                                                  {"double", DType::kF64},
                                                                  {"float32", DType::kF32},
                                                                  {"float", DType::kF32},
                                                                  {"float16", DType::kF16},
                                                                  {"half", DType::kF16},
                                                                  {"bfloat16", DType::kBF16},
                                                                  {"float8_e4m3fn", DType::kF8E4M3},
                                                                  {"float8_e5m2", DType::kF8E5M2},
                                                                  {"int64", DType::kI64},
                                                                  {"long", DType::kI64},
                                                                  {"int32", DType::kI32},
                                                                  {"int", DType::kI32},
                                                                  {"int16", DType::kI16},
                                                                  {"short", DType::kI16},
                                                                  {"int8", DType::kI8},
                                                                  {"uint8", DType::kU8},
                                                                  {"bool", DType::kBool},
                                                                  {"uint16", DType::kU16},
                                                                  {"uint32", DType::kU32},
                                                                  {"uint64", DType::kU64}};
  for (const auto& [n, t] : kNames)
    if (n == name) return t;
  return DType::kUnknown;
}

/// Whether `torch.<name>` is a dtype object's name (float8_e4m3fnuz, complex64, quint8, ...):
/// letters, digits and '_', starting like one of torch's dtype families.
bool IsTorchDTypeName(std::string_view name) {
  if (name.empty() || name.size() > 40 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string_view::npos)
    return false;
  for (std::string_view family : {"float", "bfloat", "int", "uint", "complex", "bool", "bits", "qint", "quint",
                                  "double", "half", "long", "short", "cfloat", "cdouble", "chalf"})
    if (name.substr(0, family.size()) == family) return true;
  return false;
}

/// A saved tensor's pickle holds a few dozen values; the cap keeps a hostile one's memory small.
constexpr size_t kMaxValues = size_t{1} << 18;

/// The opcodes a saved tensor's pickle uses, by what they do (CPython's Lib/pickletools.py);
/// every other opcode is refused.
enum class OpGroup : uint8_t {
  kRefused,
  kControl,        ///< PROTO, FRAME, STOP
  kStack,          ///< MARK, POP_MARK, POP, DUP
  kMemo,           ///< BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET
  kNumber,         ///< NONE, NEWTRUE, NEWFALSE, BININT*, LONG1, LONG4, BINFLOAT
  kString,         ///< the BIN*STRING, *BINUNICODE* and *BINBYTES* opcodes
  kNewContainer,   ///< EMPTY_*, TUPLE, LIST, DICT, TUPLE1-3
  kFillContainer,  ///< APPEND, APPENDS, SETITEM, SETITEMS
  kCall            ///< GLOBAL, STACK_GLOBAL, BINPERSID, REDUCE, BUILD
};

constexpr void SetOpGroup(std::array<OpGroup, 256>& groups, std::initializer_list<unsigned char> ops, OpGroup g) {
  for (unsigned char op : ops) groups[op] = g;
}

constexpr std::array<OpGroup, 256> MakeOpGroups() {
  std::array<OpGroup, 256> g{};  // kRefused
  SetOpGroup(g, {0x80, 0x95, '.'}, OpGroup::kControl);
  SetOpGroup(g, {'(', '1', '0', '2'}, OpGroup::kStack);
  SetOpGroup(g, {'q', 'r', 0x94, 'h', 'j'}, OpGroup::kMemo);
  SetOpGroup(g, {'N', 0x88, 0x89, 'K', 'M', 'J', 0x8a, 0x8b, 'G'}, OpGroup::kNumber);
  SetOpGroup(g, {'X', 0x8c, 0x8d, 'U', 'T', 'C', 'B', 0x8e}, OpGroup::kString);
  SetOpGroup(g, {')', ']', '}', 't', 'l', 'd', 0x85, 0x86, 0x87}, OpGroup::kNewContainer);
  SetOpGroup(g, {'a', 's', 'e', 'u'}, OpGroup::kFillContainer);
  SetOpGroup(g, {'c', 0x93, 'Q', 'R', 'b'}, OpGroup::kCall);
  return g;
}

constexpr std::array<OpGroup, 256> kOpGroups = MakeOpGroups();

class Machine {
 public:
  Machine(std::string_view pickle, const std::string& where) : p_(pickle), where_(where) {}

  Expected<PickledTensor> Run() {
    while (true) {
      if (pos_ >= p_.size()) return Fail("ends without a STOP opcode: truncated?");
      const size_t at = pos_;
      const uint8_t op = static_cast<uint8_t>(p_[pos_++]);
      Status st = Step(op, at);
      if (!st.ok()) return st;
      if (stopped_) break;
    }
    if (result_ >= values_.size() || values_[result_].kind != Kind::kTensor)
      return Fail(std::string("holds ") + (result_ < values_.size() ? KindName(values_[result_].kind) : "nothing") +
                  ", not a tensor (msprobe saves one tensor per file)");
    return tensors_[static_cast<size_t>(values_[result_].i)];
  }

 private:
  Status Fail(const std::string& what) const { return ParseError(where_ + ": " + what); }
  Status FailAt(size_t at, const std::string& what) const {
    return ParseError(where_ + ": byte " + std::to_string(at) + ": " + what);
  }

  bool Take(uint64_t n, std::string_view* out) {
    if (n > p_.size() - pos_) return false;
    *out = p_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }
  bool Le(int n, uint64_t* out) {
    std::string_view b;
    if (!Take(static_cast<uint64_t>(n), &b)) return false;
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[static_cast<size_t>(i)]);
    *out = v;
    return true;
  }

  Expected<uint32_t> New(Value v) {
    if (values_.size() >= kMaxValues) return Fail("more values than a saved tensor holds");
    values_.push_back(std::move(v));
    return static_cast<uint32_t>(values_.size() - 1);
  }
  Status Push(Value v) {
    auto id = New(std::move(v));
    if (!id.ok()) return id.status();
    stack_.push_back(*id);
    return Status::Ok();
  }
  bool Pop(uint32_t* out) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) return false;
    *out = stack_.back();
    stack_.pop_back();
    return true;
  }
  /// The items above the topmost mark, removed with the mark.
  bool PopToMark(std::vector<uint32_t>* out) {
    if (marks_.empty()) return false;
    size_t m = marks_.back();
    marks_.pop_back();
    out->assign(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return true;
  }

  Status Global(std::string_view module, std::string_view name, size_t at) {
    Value v;
    v.kind = Kind::kGlobal;
    v.s = std::string(module) + "." + std::string(name);
    if (module == "torch._utils" && name == "_rebuild_tensor_v2") v.callable = Callable::kRebuildTensor;
    else if (module == "torch._utils" && name == "_rebuild_tensor_v3") v.callable = Callable::kRebuildTensorV3;
    else if (module == "torch.storage" && name == "UntypedStorage") v.callable = Callable::kUntypedStorage;
    else if (module == "torch._utils" && name == "_rebuild_parameter") v.callable = Callable::kRebuildParameter;
    else if (module == "collections" && name == "OrderedDict") v.callable = Callable::kOrderedDict;
    else if (module == "torch" && name.size() > 7 && name.substr(name.size() - 7) == "Storage" &&
             name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
                 std::string_view::npos)
      v.callable = Callable::kStorageType;
    else if (module == "torch" && IsTorchDTypeName(name)) v.callable = Callable::kDType;
    else
      return FailAt(at, "refers to " + Printable(v.s) +
                            ", which a saved tensor does not use: refused, nothing in the file was run (accepted: "
                            "torch._utils._rebuild_tensor_v2/_v3, torch._utils._rebuild_parameter, "
                            "collections.OrderedDict, torch.*Storage, torch.storage.UntypedStorage, torch dtypes)");
    return Push(std::move(v));
  }

  static std::string Printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out;
  }

  bool IntOf(uint32_t id, int64_t* out) const {
    const Value& v = values_[id];
    if (v.kind != Kind::kInt && v.kind != Kind::kBool) return false;
    *out = v.i;
    return true;
  }
  bool IntsOf(uint32_t id, std::vector<int64_t>* out) const {
    const Value& v = values_[id];
    if (v.kind != Kind::kTuple && v.kind != Kind::kList) return false;
    out->clear();
    for (uint32_t item : v.items) {
      int64_t x;
      if (!IntOf(item, &x)) return false;
      out->push_back(x);
    }
    return true;
  }

  Status PersistentId(uint32_t pid, size_t at) {
    const Value& t = values_[pid];
    if (t.kind != Kind::kTuple || t.items.size() != 5 || values_[t.items[0]].kind != Kind::kString ||
        values_[t.items[0]].s != "storage")
      return FailAt(at, "a persistent id that is not ('storage', type, key, location, numel)");
    const Value& type = values_[t.items[1]];
    const Value& key = values_[t.items[2]];
    int64_t numel;
    if (type.kind != Kind::kGlobal ||
        (type.callable != Callable::kStorageType && type.callable != Callable::kUntypedStorage))
      return FailAt(at, "the storage's type is not a torch.*Storage class");
    if (key.kind != Kind::kString && key.kind != Kind::kInt) return FailAt(at, "the storage's key is not a string");
    if (!IntOf(t.items[4], &numel) || numel < 0) return FailAt(at, "the storage's size is not a count");
    Storage s;
    s.untyped = type.callable == Callable::kUntypedStorage;
    s.type = s.untyped ? "UntypedStorage" : type.s.substr(6);  // after "torch."
    s.dtype = s.untyped ? DType::kUnknown : DTypeOfStorage(s.type);
    s.key = key.kind == Kind::kString ? key.s : std::to_string(key.i);
    s.numel = static_cast<uint64_t>(numel);
    Value v;
    v.kind = Kind::kStorage;
    v.i = static_cast<int64_t>(storages_.size());
    storages_.push_back(std::move(s));
    return Push(std::move(v));
  }

  Status Reduce(uint32_t callable, uint32_t args_id, size_t at) {
    const Value& f = values_[callable];
    const Value& args = values_[args_id];
    if (f.kind != Kind::kGlobal) return FailAt(at, std::string("calls ") + KindName(f.kind));
    if (args.kind != Kind::kTuple) return FailAt(at, "the arguments of " + f.s + " are not a tuple");
    switch (f.callable) {
      case Callable::kOrderedDict: {
        Value d;
        d.kind = Kind::kDict;  // the backward hooks: empty in a saved tensor, and never used here
        return Push(std::move(d));
      }
      case Callable::kRebuildParameter: {
        if (args.items.empty() || values_[args.items[0]].kind != Kind::kTensor)
          return FailAt(at, "torch._utils._rebuild_parameter without a tensor");
        stack_.push_back(args.items[0]);
        return Status::Ok();
      }
      case Callable::kRebuildTensor:
      case Callable::kRebuildTensorV3: {
        // v2: (storage, offset, size, stride, requires_grad, hooks[, metadata]); v3 (newer dtypes
        // such as fp8, on an UntypedStorage): the same with the dtype after the hooks.
        const bool v3 = f.callable == Callable::kRebuildTensorV3;
        if (args.items.size() < (v3 ? 7u : 4u) || args.items.size() > (v3 ? 8u : 7u))
          return FailAt(at, f.s + " with " + std::to_string(args.items.size()) + " arguments");
        const Value& storage = values_[args.items[0]];
        if (storage.kind != Kind::kStorage) return FailAt(at, "the tensor's storage is not a persistent storage id");
        PickledTensor t;
        const Storage& s = storages_[static_cast<size_t>(storage.i)];
        t.storage_type = s.type, t.dtype = s.dtype, t.storage_key = s.key, t.storage_numel = s.numel;
        if (v3) {
          const Value& dtype = values_[args.items[6]];
          if (dtype.kind != Kind::kGlobal || dtype.callable != Callable::kDType)
            return FailAt(at, "torch._utils._rebuild_tensor_v3 without a dtype");
          t.dtype = DTypeOfTorchName(dtype.s.substr(6));
          t.storage_type += " of " + dtype.s;
        }
        if (s.untyped) {  // its size is in bytes
          if (!v3) return FailAt(at, "an UntypedStorage without the tensor's dtype");
          const size_t es = DTypeSize(t.dtype);
          t.storage_numel = es ? s.numel / es : 0;
        }
        int64_t offset;
        if (!IntOf(args.items[1], &offset) || offset < 0)
          return FailAt(at, "the tensor's storage offset is not a count");
        t.storage_offset = static_cast<uint64_t>(offset);
        if (!IntsOf(args.items[2], &t.shape) || !IntsOf(args.items[3], &t.strides))
          return FailAt(at, "the tensor's size or stride is not a tuple of ints");
        if (t.shape.size() != t.strides.size())
          return FailAt(at, "the tensor has " + std::to_string(t.shape.size()) + " sizes and " +
                                std::to_string(t.strides.size()) + " strides");
        int64_t grad = 0;
        if (args.items.size() > 4 && IntOf(args.items[4], &grad)) t.requires_grad = grad != 0;
        Value v;
        v.kind = Kind::kTensor;
        v.i = static_cast<int64_t>(tensors_.size());
        tensors_.push_back(std::move(t));
        return Push(std::move(v));
      }
      case Callable::kStorageType:
      case Callable::kUntypedStorage:
      case Callable::kDType:
      case Callable::kNone: break;
    }
    return FailAt(at, "calls " + f.s + ", which a saved tensor does not: refused");
  }

  Status Truncated(size_t at) const { return FailAt(at, "the pickle ends inside an opcode: truncated?"); }
  Status Underflow(uint8_t op, size_t at) const {
    return FailAt(at, "opcode '" + Printable(std::string(1, static_cast<char>(op))) +
                          "' finds the stack empty: not a valid pickle");
  }
  Status Refused(uint8_t op, size_t at) const {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", op);
    return FailAt(at, std::string("opcode ") + hex + " is not one a saved tensor uses: refused, nothing was run");
  }

  /// One opcode: dispatched by its group (kOpGroups); an opcode of no group is refused.
  Status Step(uint8_t op, size_t at) {
    switch (kOpGroups[op]) {
      case OpGroup::kControl: return StepControl(op, at);
      case OpGroup::kStack: return StepStack(op, at);
      case OpGroup::kMemo: return StepMemo(op, at);
      case OpGroup::kNumber: return StepNumber(op, at);
      case OpGroup::kString: return StepString(op, at);
      case OpGroup::kNewContainer: return StepNewContainer(op, at);
      case OpGroup::kFillContainer: return StepFillContainer(op, at);
      case OpGroup::kCall: return StepCall(op, at);
      case OpGroup::kRefused: break;
    }
    return Refused(op, at);
  }

  /// PROTO, FRAME, STOP.
  Status StepControl(uint8_t op, size_t at) {
    uint64_t n = 0;
    switch (op) {
      case 0x80:  // PROTO
        if (!Le(1, &n)) return Truncated(at);
        if (n > 5) return FailAt(at, "pickle protocol " + std::to_string(n) + " is not known");
        return Status::Ok();
      case 0x95:  // FRAME: a length hint only
        if (!Le(8, &n)) return Truncated(at);
        return Status::Ok();
      case '.':  // STOP
        if (!Pop(&result_)) return Underflow(op, at);
        stopped_ = true;
        return Status::Ok();
      default: break;
    }
    return Refused(op, at);
  }

  /// MARK, POP_MARK, POP, DUP.
  Status StepStack(uint8_t op, size_t at) {
    uint32_t x = 0;
    switch (op) {
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return Status::Ok();
      case '1': {  // POP_MARK
        std::vector<uint32_t> dropped;
        if (!PopToMark(&dropped)) return Underflow(op, at);
        return Status::Ok();
      }
      case '0':  // POP
        if (!Pop(&x)) return Underflow(op, at);
        return Status::Ok();
      case '2':  // DUP
        if (stack_.empty()) return Underflow(op, at);
        stack_.push_back(stack_.back());
        return Status::Ok();
      default: break;
    }
    return Refused(op, at);
  }

  /// BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET.
  Status StepMemo(uint8_t op, size_t at) {
    uint64_t n = 0;
    switch (op) {
      case 'q':
      case 'r':
      case 0x94: {  // BINPUT / LONG_BINPUT / MEMOIZE
        if (op == 0x94) n = memo_.size();
        else if (!Le(op == 'q' ? 1 : 4, &n)) return Truncated(at);
        if (stack_.empty()) return Underflow(op, at);
        memo_[n] = stack_.back();
        return Status::Ok();
      }
      case 'h':
      case 'j': {  // BINGET / LONG_BINGET
        if (!Le(op == 'h' ? 1 : 4, &n)) return Truncated(at);
        auto it = memo_.find(n);
        if (it == memo_.end()) return FailAt(at, "memo entry " + std::to_string(n) + " was never stored");
        stack_.push_back(it->second);
        return Status::Ok();
      }
      default: break;
    }
    return Refused(op, at);
  }

  /// NONE, NEWTRUE / NEWFALSE, the ints, BINFLOAT.
  Status StepNumber(uint8_t op, size_t at) {
    uint64_t n = 0;
    Value v;
    switch (op) {
      case 'N': return Push(Value{});
      case 0x88:
      case 0x89:  // NEWTRUE / NEWFALSE
        v.kind = Kind::kBool;
        v.i = op == 0x88;
        return Push(std::move(v));
      case 'K':
      case 'M':
      case 'J': {  // BININT1 / BININT2 / BININT (signed)
        int len = op == 'K' ? 1 : op == 'M' ? 2 : 4;
        if (!Le(len, &n)) return Truncated(at);
        v.kind = Kind::kInt;
        v.i =
            op == 'J' ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(n))) : static_cast<int64_t>(n);
        return Push(std::move(v));
      }
      case 0x8a:
      case 0x8b: {  // LONG1 / LONG4: little-endian two's complement of n bytes
        if (!Le(op == 0x8a ? 1 : 4, &n)) return Truncated(at);
        if (n > 8) return FailAt(at, "an integer of " + std::to_string(n) + " bytes: larger than a tensor uses");
        uint64_t bits = 0;
        if (!Le(static_cast<int>(n), &bits)) return Truncated(at);
        if (n > 0 && n < 8 && (bits >> (8 * n - 1)) & 1) bits |= ~uint64_t{0} << (8 * n);  // sign-extend
        v.kind = Kind::kInt;
        v.i = static_cast<int64_t>(bits);
        return Push(std::move(v));
      }
      case 'G': {  // BINFLOAT, big-endian
        std::string_view b;
        if (!Take(8, &b)) return Truncated(at);
        uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);
        v.kind = Kind::kFloat;
        std::memcpy(&v.f, &bits, 8);
        return Push(std::move(v));
      }
      default: break;
    }
    return Refused(op, at);
  }

  /// BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, SHORT_BINSTRING, BINSTRING, SHORT_BINBYTES,
  /// BINBYTES, BINBYTES8: a length of 1, 4 or 8 bytes, then the bytes.
  Status StepString(uint8_t op, size_t at) {
    const int len = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e) ? 8 : 4;
    uint64_t n = 0;
    std::string_view b;
    if (!Le(len, &n)) return Truncated(at);
    if (!Take(n, &b)) return Truncated(at);
    Value v;
    v.kind = Kind::kString;
    v.s = std::string(b);
    return Push(std::move(v));
  }

  /// EMPTY_TUPLE / EMPTY_LIST / EMPTY_DICT, TUPLE / LIST / DICT from the mark, TUPLE1-3.
  Status StepNewContainer(uint8_t op, size_t at) {
    Value v;
    switch (op) {
      case ')':  // EMPTY_TUPLE
        v.kind = Kind::kTuple;
        return Push(std::move(v));
      case ']':
      case '}':  // EMPTY_LIST / EMPTY_DICT
        v.kind = op == ']' ? Kind::kList : Kind::kDict;
        return Push(std::move(v));
      case 't':
      case 'l':
      case 'd':  // TUPLE / LIST / DICT from the mark
        v.kind = op == 't' ? Kind::kTuple : op == 'l' ? Kind::kList : Kind::kDict;
        if (!PopToMark(&v.items)) return FailAt(at, "a tuple, list or dict without a mark");
        if (op == 'd' && v.items.size() % 2) return FailAt(at, "a dict with an odd number of items");
        return Push(std::move(v));
      case 0x85:
      case 0x86:
      case 0x87:  // TUPLE1-3
        v.kind = Kind::kTuple;
        v.items.resize(op - 0x84u);
        for (size_t i = v.items.size(); i-- > 0;)
          if (!Pop(&v.items[i])) return Underflow(op, at);
        return Push(std::move(v));
      default: break;
    }
    return Refused(op, at);
  }

  /// APPEND, SETITEM, APPENDS / SETITEMS from the mark.
  Status StepFillContainer(uint8_t op, size_t at) {
    uint32_t x = 0, y = 0;
    switch (op) {
      case 'a':  // APPEND
        if (!Pop(&x) || stack_.empty()) return Underflow(op, at);
        if (values_[stack_.back()].kind != Kind::kList) return FailAt(at, "APPEND to something not a list");
        values_[stack_.back()].items.push_back(x);
        return Status::Ok();
      case 's':  // SETITEM
        if (!Pop(&y) || !Pop(&x) || stack_.empty()) return Underflow(op, at);
        if (values_[stack_.back()].kind != Kind::kDict) return FailAt(at, "SETITEM on something not a dict");
        values_[stack_.back()].items.push_back(x), values_[stack_.back()].items.push_back(y);
        return Status::Ok();
      case 'e':
      case 'u': {  // APPENDS / SETITEMS from the mark
        std::vector<uint32_t> items;
        if (!PopToMark(&items) || stack_.empty()) return Underflow(op, at);
        Value& target = values_[stack_.back()];
        if (target.kind != (op == 'e' ? Kind::kList : Kind::kDict) || (op == 'u' && items.size() % 2))
          return FailAt(at, op == 'e' ? "APPENDS to something not a list" : "SETITEMS on something not a dict");
        target.items.insert(target.items.end(), items.begin(), items.end());
        return Status::Ok();
      }
      default: break;
    }
    return Refused(op, at);
  }

  /// GLOBAL, STACK_GLOBAL, BINPERSID, REDUCE, BUILD: what would run code in Python, held to the
  /// allow-list of Global / PersistentId / Reduce.
  Status StepCall(uint8_t op, size_t at) {
    uint32_t x = 0, y = 0;
    switch (op) {
      case 'c': {  // GLOBAL module\nname\n
        size_t nl = p_.find('\n', pos_);
        if (nl == std::string_view::npos) return Truncated(at);
        std::string_view module = p_.substr(pos_, nl - pos_);
        size_t nl2 = p_.find('\n', nl + 1);
        if (nl2 == std::string_view::npos) return Truncated(at);
        std::string_view name = p_.substr(nl + 1, nl2 - nl - 1);
        pos_ = nl2 + 1;
        return Global(module, name, at);
      }
      case 0x93: {  // STACK_GLOBAL
        if (!Pop(&y) || !Pop(&x)) return Underflow(op, at);
        if (values_[x].kind != Kind::kString || values_[y].kind != Kind::kString)
          return FailAt(at, "STACK_GLOBAL of something not a name");
        std::string module = values_[x].s, name = values_[y].s;
        return Global(module, name, at);
      }
      case 'Q':  // BINPERSID
        if (!Pop(&x)) return Underflow(op, at);
        return PersistentId(x, at);
      case 'R':  // REDUCE
        if (!Pop(&y) || !Pop(&x)) return Underflow(op, at);
        return Reduce(x, y, at);
      case 'b': {  // BUILD: the state of a dict or tensor; not needed for the data
        if (!Pop(&y) || stack_.empty()) return Underflow(op, at);
        Kind k = values_[stack_.back()].kind;
        if (k != Kind::kDict && k != Kind::kTensor) return FailAt(at, std::string("BUILD on ") + KindName(k));
        return Status::Ok();
      }
      default: break;
    }
    return Refused(op, at);
  }

  std::string_view p_;
  const std::string& where_;
  size_t pos_ = 0;
  bool stopped_ = false;
  uint32_t result_ = UINT32_MAX;
  std::vector<Value> values_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::vector<Storage> storages_;
  std::vector<PickledTensor> tensors_;
};

}  // namespace

DType DTypeOfStorage(std::string_view name) {
  static constexpr std::pair<std::string_view, DType> kTypes[] = {{"DoubleStorage", DType::kF64},
                                                                  {"FloatStorage", DType::kF32},
                                                                  {"HalfStorage", DType::kF16},
                                                                  {"BFloat16Storage", DType::kBF16},
                                                                  {"LongStorage", DType::kI64},
                                                                  {"IntStorage", DType::kI32},
                                                                  {"ShortStorage", DType::kI16},
                                                                  {"CharStorage", DType::kI8},
                                                                  {"ByteStorage", DType::kU8},
                                                                  {"BoolStorage", DType::kBool},
                                                                  {"Float8_e4m3fnStorage", DType::kF8E4M3},
                                                                  {"Float8_e5m2Storage", DType::kF8E5M2},
                                                                  {"UInt16Storage", DType::kU16},
                                                                  {"UInt32Storage", DType::kU32},
                                                                  {"UInt64Storage", DType::kU64}};
  for (const auto& [n, t] : kTypes)
    if (n == name) return t;
  return DType::kUnknown;
}

Expected<PickledTensor> ReadPickledTensor(std::string_view pickle, const std::string& where) {
  return Machine(pickle, where).Run();
}

}  // namespace portkit::accuracy
