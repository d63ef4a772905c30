#include "accuracy/safetensors.h"

#include <simdjson.h>

#include <cstring>

namespace portkit::accuracy {

Expected<SafetensorsFile> SafetensorsFile::Open(const std::filesystem::path& path) {
  auto view = FileView::Open(path);
  if (!view.ok()) return view.status();
  return FromView(std::move(*view), path);
}

Expected<SafetensorsFile> SafetensorsFile::FromView(FileView view, const std::filesystem::path& path) {
  const std::string p = path.string();
  SafetensorsFile f;
  f.view_ = std::move(view);
  std::string_view bytes = f.view_.data();
  if (bytes.size() < 8)
    return ParseError(p + ": " + std::to_string(bytes.size()) + " bytes: too short for a safetensors header");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  if (header_len > bytes.size() - 8)
    return ParseError(p + ": header length " + std::to_string(header_len) + " runs past the end of the file (" +
                      std::to_string(bytes.size()) + " bytes): truncated or not a safetensors file");
  simdjson::padded_string header(bytes.substr(8, header_len));
  uint64_t data_size = bytes.size() - 8 - header_len;
  f.data_ = reinterpret_cast<const uint8_t*>(bytes.data()) + 8 + header_len;
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object root;
  if (parser.iterate(header).get(doc) || doc.get_object().get(root))
    return ParseError(p + ": the header is not a JSON object");
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return ParseError(p + ": bad key in the header");
    std::string name(key);
    simdjson::ondemand::object obj;
    if (field.value().get_object().get(obj)) return ParseError(p + ": '" + name + "' is not an object");
    if (name == "__metadata__") {
      for (auto m : obj) {
        std::string_view k, v;
        if (m.unescaped_key().get(k) || m.value().get_string().get(v)) continue;
        f.metadata_[std::string(k)] = std::string(v);
      }
      continue;
    }
    TensorInfo t;
    bool have_dtype = false, have_shape = false, have_offsets = false;
    for (auto attr : obj) {
      std::string_view k;
      if (attr.unescaped_key().get(k)) return ParseError(p + ": bad key in '" + name + "'");
      if (k == "dtype") {
        std::string_view d;
        if (attr.value().get_string().get(d)) return ParseError(p + ": '" + name + "': dtype is not a string");
        t.dtype = ParseDType(d);
        if (t.dtype == DType::kUnknown) return ParseError(p + ": '" + name + "': unsupported dtype " + std::string(d));
        have_dtype = true;
      } else if (k == "shape" || k == "data_offsets") {
        simdjson::ondemand::array arr;
        if (attr.value().get_array().get(arr))
          return ParseError(p + ": '" + name + "': " + std::string(k) + " is not an array");
        std::vector<int64_t> values;
        for (auto v : arr) {
          int64_t x;
          if (v.get_int64().get(x) || x < 0)
            return ParseError(p + ": '" + name + "': " + std::string(k) + " holds a non-integer or negative value");
          values.push_back(x);
        }
        if (k == "shape") {
          t.shape = std::move(values);
          have_shape = true;
        } else {
          if (values.size() != 2) return ParseError(p + ": '" + name + "': data_offsets needs [begin, end]");
          t.begin = static_cast<uint64_t>(values[0]);
          t.end = static_cast<uint64_t>(values[1]);
          have_offsets = true;
        }
      }
    }
    if (!have_dtype || !have_shape || !have_offsets)
      return ParseError(p + ": '" + name + "' lacks dtype, shape or data_offsets");
    if (t.begin > t.end || t.end > data_size)
      return ParseError(p + ": '" + name + "': data_offsets [" + std::to_string(t.begin) + ", " +
                        std::to_string(t.end) + "] outside the " + std::to_string(data_size) +
                        " data bytes (truncated file?)");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d != 0 && numel > UINT64_MAX / static_cast<uint64_t>(d))
        return ParseError(p + ": '" + name + "': shape overflows");
      numel *= static_cast<uint64_t>(d);
    }
    // numel × size may wrap around; compare by division instead.
    uint64_t bytes = t.end - t.begin, size = DTypeSize(t.dtype);
    if (size == 0 || bytes % size != 0 || bytes / size != numel)
      return ParseError(p + ": '" + name + "': " + std::to_string(t.end - t.begin) + " bytes for " +
                        std::to_string(numel) + " elements of " + std::string(DTypeName(t.dtype)));
    f.tensors_.emplace(std::move(name), std::move(t));
  }
  return f;
}

}  // namespace portkit::accuracy
