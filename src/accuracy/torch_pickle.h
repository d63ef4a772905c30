#pragma once
/// The `data.pkl` record of a torch.save file holding one tensor, read by a small pickle
/// interpreter that never runs anything: it knows the opcodes a saved tensor uses (protocol 2, and
/// the framing and memo opcodes of protocols 3-5), builds plain values (None, bools, ints, floats,
/// strings, tuples, lists, dicts), and accepts only these globals, none of which it calls:
/// `torch._utils._rebuild_tensor_v2` and `torch._utils._rebuild_parameter` (a tensor from its storage,
/// offset, size and stride), `collections.OrderedDict` (an empty dict: the backward hooks) and the
/// `torch.<Type>Storage` classes (in a persistent id `('storage', torch.FloatStorage, key,
/// location, numel)`); for the dtypes torch 2 saves the newer way (fp8, uint16/32/64) also
/// `torch._utils._rebuild_tensor_v3`, `torch.storage.UntypedStorage` and dtype names
/// (`torch.float8_e4m3fn`). Any other global (`os.system`, `builtins.eval`, ...) or opcode (INST,
/// OBJ, NEWOBJ, EXT*) is refused with a message naming it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "accuracy/dtype.h"
#include "core/status.h"

namespace portkit::accuracy {

struct PickledTensor {
  std::string storage_type;       ///< "FloatStorage", "BFloat16Storage", ...
  DType dtype = DType::kUnknown;  ///< of the storage type; kUnknown for one portkit does not compare
  std::string storage_key;        ///< the storage's record is `<archive>/data/<storage_key>`
  uint64_t storage_numel = 0;     ///< elements of the storage (of `dtype`; 0 when `dtype` is kUnknown and untyped)
  uint64_t storage_offset = 0;    ///< first element of the tensor in its storage
  std::vector<int64_t> shape, strides;  ///< strides in elements
  bool requires_grad = false;
};

/// The storage element type of a `torch.<name>` storage class: FloatStorage → F32, ...; kUnknown
/// for the others (complex, quantised).
DType DTypeOfStorage(std::string_view name);

/// Interprets `pickle`, the bytes of a data.pkl record; `where` names it in errors
/// (`FILE: data.pkl: ...`, kParse). The pickle must end in one tensor.
Expected<PickledTensor> ReadPickledTensor(std::string_view pickle, const std::string& where);

}  // namespace portkit::accuracy
