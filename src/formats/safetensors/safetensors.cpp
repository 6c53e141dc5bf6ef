#include "peregrine/formats/safetensors/safetensors.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <utility>

#include "peregrine/core/json_util.h"
#include "peregrine/core/byte_reader.h"

namespace peregrine {
namespace {

using nlohmann::json;

// A valid header is {name: {dtype, shape: [..], data_offsets: [..]}, __metadata__: {..}}.
constexpr int kMaxHeaderDepth = 3;

/// Whether `s` is a dtype the spec defines (so an error can tell "unsupported" from "unknown").
bool is_known_safetensors_dtype(std::string_view s) {
  for (std::string_view k : {"BOOL", "U8", "I8", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
                             "F64", "I64", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                             "F6_E3M2", "F4", "C64"}) {
    if (s == k) return true;
  }
  return false;
}

struct Entry {
  SafetensorsTensor tensor;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Expected<Entry> read_entry(const std::string& name, const json& v, const std::string& what) {
  const std::string where = what + ": tensor '" + json_util::printable(name) + "'";
  if (!v.is_object()) {
    return corrupt_file(where + " header entry is a " + json_util::type_name(v) + ", expected an object");
  }
  const auto dtype_it = v.find("dtype");
  const auto shape_it = v.find("shape");
  const auto offsets_it = v.find("data_offsets");
  if (dtype_it == v.end() || !dtype_it->is_string()) {
    return corrupt_file(where + " has no \"dtype\" string");
  }
  if (shape_it == v.end() || !shape_it->is_array()) {
    return corrupt_file(where + " has no \"shape\" list");
  }
  if (offsets_it == v.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    return corrupt_file(where + " has no \"data_offsets\" [begin, end] pair");
  }
  const auto& dtype_str = dtype_it->get_ref<const std::string&>();
  const auto dtype = safetensors_dtype_from_name(dtype_str);
  if (!dtype) {
    return unsupported(where + " has dtype " + json_util::printable(dtype_str, 32) +
                       (is_known_safetensors_dtype(dtype_str) ? "" : " (not a safetensors dtype)") +
                       "; supported: F32, F16, BF16, I32, I8, F8_E4M3, F8_E5M2");
  }
  Entry e;
  e.tensor.name = name;
  e.tensor.dtype = *dtype;
  // numel as a product of non-negative dims; every partial product must fit in int64 so that
  // TensorView::numel() cannot overflow either.
  constexpr auto kMaxI64 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t numel = 1;
  e.tensor.shape.reserve(shape_it->size());
  for (const auto& d : *shape_it) {
    const auto dim = json_util::as_u64(d);
    if (!dim) return corrupt_file(where + " shape has a " + json_util::type_name(d) +
                                  " entry; dims must be non-negative integers");
    if (*dim > kMaxI64 || (*dim != 0 && numel > kMaxI64 / *dim)) {
      return corrupt_file(where + " shape overflows (element count too large)");
    }
    numel *= *dim;
    e.tensor.shape.push_back(static_cast<std::int64_t>(*dim));
  }
  const std::uint64_t elem = safetensors_dtype_bytes(*dtype);
  if (numel > kMaxI64 / elem) return corrupt_file(where + " shape overflows (byte count too large)");
  const std::uint64_t nbytes = numel * elem;
  const auto begin = json_util::as_u64((*offsets_it)[0]);
  const auto end = json_util::as_u64((*offsets_it)[1]);
  if (!begin || !end) return corrupt_file(where + " data_offsets must be non-negative integers");
  if (*begin > *end) {
    return corrupt_file(where + " data_offsets [" + std::to_string(*begin) + ", " +
                        std::to_string(*end) + "] are reversed");
  }
  if (*end - *begin != nbytes) {
    return corrupt_file(where + " holds " + std::to_string(*end - *begin) + " bytes but shape " +
                        e.tensor.shape_string() + " of " + dtype_str + " needs " +
                        std::to_string(nbytes));
  }
  e.begin = *begin;
  e.end = *end;
  e.tensor.nbytes = static_cast<std::size_t>(nbytes);
  return e;
}

Expected<std::map<std::string, std::string>> read_metadata(const json& v, const std::string& what) {
  if (!v.is_object()) {
    return corrupt_file(what + ": __metadata__ is a " + json_util::type_name(v) + ", expected an object");
  }
  std::map<std::string, std::string> out;
  for (const auto& [k, val] : v.items()) {
    if (!val.is_string()) {
      return corrupt_file(what + ": __metadata__ entry '" + json_util::printable(k) + "' is a " +
                          json_util::type_name(val) + ", expected a string");
    }
    out.emplace(k, val.get<std::string>());
  }
  return out;
}

}  // namespace

namespace {

struct DtypeInfo {
  SafetensorsDtype type;
  std::string_view name;
  std::size_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::kF32, "F32", 4}, {SafetensorsDtype::kF16, "F16", 2},
    {SafetensorsDtype::kBF16, "BF16", 2}, {SafetensorsDtype::kI32, "I32", 4},
    {SafetensorsDtype::kI8, "I8", 1}, {SafetensorsDtype::kF8E4M3, "F8_E4M3", 1},
    {SafetensorsDtype::kF8E5M2, "F8_E5M2", 1}};
constexpr std::pair<DType, SafetensorsDtype> kWeightDtypes[] = {
    {DType::kF32, SafetensorsDtype::kF32}, {DType::kF16, SafetensorsDtype::kF16},
    {DType::kBF16, SafetensorsDtype::kBF16}};

const DtypeInfo& info(SafetensorsDtype t) { return kDtypes[static_cast<std::size_t>(t)]; }

}  // namespace

std::optional<SafetensorsDtype> safetensors_dtype_from_name(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (d.name == name) return d.type;
  }
  return std::nullopt;
}

std::string_view safetensors_dtype_name(SafetensorsDtype t) { return info(t).name; }

std::size_t safetensors_dtype_bytes(SafetensorsDtype t) { return info(t).bytes; }

std::optional<SafetensorsDtype> safetensors_dtype_of(DType t) {
  for (const auto& [d, s] : kWeightDtypes) {
    if (d == t) return s;
  }
  return std::nullopt;
}

std::optional<std::string_view> safetensors_dtype_name(DType t) {
  const auto s = safetensors_dtype_of(t);
  if (!s) return std::nullopt;
  return safetensors_dtype_name(*s);
}

std::int64_t SafetensorsTensor::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string SafetensorsTensor::shape_string() const {
  TensorView v;
  v.shape = shape;
  return v.shape_string();
}

std::optional<TensorView> SafetensorsTensor::weight_view() const {
  for (const auto& [d, s] : kWeightDtypes) {
    if (s == dtype) return TensorView{name, d, shape, data, nbytes, {}};
  }
  return std::nullopt;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  PEREGRINE_ASSIGN_OR_RETURN(SafetensorsFile f, parse(file->bytes(), path));
  f.file_ = std::move(file);
  return f;
}

Expected<SafetensorsFile> SafetensorsFile::parse(std::span<const std::uint8_t> bytes,
                                                 const std::string& what) {
  ByteReader r(bytes, what);
  auto n = r.read<std::uint64_t>();
  if (!n) return corrupt_file(what + " is too small to be a safetensors file (" +
                              std::to_string(bytes.size()) + " bytes)");
  if (*n > kMaxSafetensorsHeaderBytes) {
    return corrupt_file(what + ": safetensors header length " + std::to_string(*n) +
                        " exceeds the " + std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  }
  if (*n > r.remaining()) {
    return corrupt_file(what + ": safetensors header length " + std::to_string(*n) +
                        " is past the end of the file (" + std::to_string(bytes.size()) +
                        " bytes; truncated?)");
  }
  const std::size_t header_len = static_cast<std::size_t>(*n);
  const auto* header = reinterpret_cast<const char*>(bytes.data() + 8);
  if (header_len < 2 || header[0] != '{') {
    return corrupt_file(what + " is not a safetensors file (header does not start with '{')");
  }
  PEREGRINE_ASSIGN_OR_RETURN(json j, json_util::parse(std::string_view(header, header_len),
                                                      what + ": safetensors header", kMaxHeaderDepth));
  if (!j.is_object()) return corrupt_file(what + ": safetensors header is not a JSON object");

  const std::uint8_t* data = bytes.data() + 8 + header_len;
  const std::uint64_t data_size = bytes.size() - 8 - header_len;
  SafetensorsFile f;
  std::vector<Entry> entries;
  entries.reserve(j.size());
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      PEREGRINE_ASSIGN_OR_RETURN(f.metadata_, read_metadata(v, what));
      continue;
    }
    PEREGRINE_ASSIGN_OR_RETURN(auto e, read_entry(name, v, what));
    if (e.end > data_size) {
      return corrupt_file(what + ": tensor '" + json_util::printable(name) + "' data_offsets end " + std::to_string(e.end) +
                          " is past the end of the " + std::to_string(data_size) +
                          "-byte data buffer (truncated?)");
    }
    entries.push_back(std::move(e));
  }
  // The spec requires the tensors to tile the data buffer: no overlaps, no holes, no tail.
  std::vector<const Entry*> by_offset;
  by_offset.reserve(entries.size());
  for (const auto& e : entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t covered = 0;
  for (const Entry* e : by_offset) {
    if (e->begin != covered) {
      return corrupt_file(what + ": tensor '" + json_util::printable(e->tensor.name) + "' starts at data byte " +
                          std::to_string(e->begin) + " but the previous tensor ends at " +
                          std::to_string(covered) +
                          (e->begin < covered ? " (overlapping tensors)" : " (hole in the data buffer)"));
    }
    covered = e->end;
  }
  if (covered != data_size) {
    return corrupt_file(what + ": the tensors cover " + std::to_string(covered) + " of the " +
                        std::to_string(data_size) + " data bytes (trailing data or wrong offsets)");
  }
  f.tensors_.reserve(entries.size());
  for (auto& e : entries) {
    e.tensor.data = data + e.begin;
    f.tensors_.push_back(std::move(e.tensor));
  }
  // json objects iterate in key order, so tensors_ is already sorted by name.
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

}  // namespace peregrine
