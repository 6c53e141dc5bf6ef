#include "peregrine/formats/gguf/gguf.h"

#include <limits>
#include <set>
#include <utility>

#include "peregrine/core/json_util.h"
#include "peregrine/quant/sparse_nm.h"

namespace peregrine {
namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::uint32_t kMaxDims = 4;
// ggml type ids (ggml.h enum ggml_type) of the dtypes Peregrine reads.
constexpr std::pair<std::uint32_t, DType> kGgmlTypes[] = {
    {0, DType::kF32},   {1, DType::kF16},   {2, DType::kQ4_0},   {3, DType::kQ4_1},    {6, DType::kQ5_0},
    {7, DType::kQ5_1},  {8, DType::kQ8_0},  {10, DType::kQ2_K},  {11, DType::kQ3_K},   {12, DType::kQ4_K},
    {13, DType::kQ5_K}, {14, DType::kQ6_K}, {20, DType::kIQ4_NL}, {23, DType::kIQ4_XS}, {30, DType::kBF16},
    // Peregrine's N:M sparse formats (core/dtype.h), outside ggml's ids: llama.cpp cannot read them.
    {1000, DType::kF16_S24}, {1001, DType::kBF16_S24}, {1002, DType::kQ8_0_S24}, {1003, DType::kQ4_0_S24},
    {1004, DType::kF16_S48}, {1005, DType::kBF16_S48}, {1006, DType::kQ8_0_S48}, {1007, DType::kQ4_0_S48}};
// ggml.h's names of every type id, for errors about the ones Peregrine does not read.
constexpr std::string_view kGgmlTypeNames[] = {
    "F32",   "F16",     "Q4_0",   "Q4_1",   "Q4_2 (removed)", "Q4_3 (removed)", "Q5_0",  "Q5_1",
    "Q8_0",  "Q8_1",    "Q2_K",   "Q3_K",   "Q4_K",    "Q5_K",    "Q6_K",    "Q8_K",
    "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S",   "IQ2_S",   "IQ4_XS",
    "I8",    "I16",     "I32",    "I64",    "F64",     "IQ1_M",   "BF16",    "Q4_0_4_4 (removed)",
    "Q4_0_4_8 (removed)", "Q4_0_8_8 (removed)", "TQ1_0", "TQ2_0", "IQ4_NL_4_4 (removed)",
    "IQ4_NL_4_8 (removed)", "IQ4_NL_8_8 (removed)", "MXFP4", "NVFP4", "Q1_0", "Q2_0"};

static_assert(std::size(kGgmlTypeNames) == 43);  // GGML_TYPE_COUNT

std::string ggml_type_label(std::uint32_t type) {
  const std::string id = std::to_string(type);
  return type < std::size(kGgmlTypeNames) ? std::string(kGgmlTypeNames[type]) + " (id " + id + ")" : "id " + id + " (unknown)";
}

std::string supported_ggml_types() {
  std::string names;
  for (const auto& [id, t] : kGgmlTypes) {
    names += (names.empty() ? "" : ", ") + std::string(id < std::size(kGgmlTypeNames) ? kGgmlTypeNames[id] : dtype_name(t));
  }
  return names;
}

// No real metadata array comes near this (the largest vocabularies/merge lists are ~1M);
// each element costs ~40 bytes in memory, so this also bounds what a hostile file can allocate.
constexpr std::uint64_t kMaxArrayElements = std::uint64_t{1} << 23;
constexpr std::uint64_t kMinKvBytes = 8 + 1 + 4;           // empty key, type, smallest value
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // empty name, one dim

std::size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    case GgufType::kString: return 8;  // at least the length prefix
    case GgufType::kArray: return 12;
  }
  return 0;
}

Expected<std::string> read_gguf_string(ByteReader& r) {
  PEREGRINE_ASSIGN_OR_RETURN(auto len, r.read<std::uint64_t>());
  return r.read_string(len);
}

template <typename T, typename As>
Expected<GgufScalar> read_as(ByteReader& r) {
  PEREGRINE_ASSIGN_OR_RETURN(T v, r.read<T>());
  return GgufScalar(static_cast<As>(v));
}

Expected<GgufScalar> read_scalar(ByteReader& r, GgufType t) {
  switch (t) {
    case GgufType::kU8: return read_as<std::uint8_t, std::uint64_t>(r);
    case GgufType::kI8: return read_as<std::int8_t, std::int64_t>(r);
    case GgufType::kU16: return read_as<std::uint16_t, std::uint64_t>(r);
    case GgufType::kI16: return read_as<std::int16_t, std::int64_t>(r);
    case GgufType::kU32: return read_as<std::uint32_t, std::uint64_t>(r);
    case GgufType::kI32: return read_as<std::int32_t, std::int64_t>(r);
    case GgufType::kF32: return read_as<float, double>(r);
    case GgufType::kU64: return read_as<std::uint64_t, std::uint64_t>(r);
    case GgufType::kI64: return read_as<std::int64_t, std::int64_t>(r);
    case GgufType::kF64: return read_as<double, double>(r);
    case GgufType::kBool: {
      PEREGRINE_ASSIGN_OR_RETURN(auto v, r.read<std::uint8_t>());
      if (v > 1) return corrupt_file("GGUF bool value is " + std::to_string(v));
      return GgufScalar(v == 1);
    }
    case GgufType::kString: {
      PEREGRINE_ASSIGN_OR_RETURN(auto s, read_gguf_string(r));
      return GgufScalar(std::move(s));
    }
    case GgufType::kArray: break;
  }
  return corrupt_file("GGUF value type " + std::to_string(static_cast<std::uint32_t>(t)) +
                      " is not a scalar type");
}

Expected<GgufType> read_type(ByteReader& r) {
  PEREGRINE_ASSIGN_OR_RETURN(auto t, r.read<std::uint32_t>());
  if (t > static_cast<std::uint32_t>(GgufType::kF64)) {
    return corrupt_file("unknown GGUF metadata value type " + std::to_string(t));
  }
  return static_cast<GgufType>(t);
}

Expected<GgufValue> read_value(ByteReader& r, const std::string& key) {
  GgufValue v;
  PEREGRINE_ASSIGN_OR_RETURN(v.type, read_type(r));
  if (v.type != GgufType::kArray) {
    PEREGRINE_ASSIGN_OR_RETURN(v.scalar, read_scalar(r, v.type));
    return v;
  }
  PEREGRINE_ASSIGN_OR_RETURN(v.elem_type, read_type(r));
  if (v.elem_type == GgufType::kArray) return unsupported("GGUF key '" + json_util::printable(key) + "' is an array of arrays");
  PEREGRINE_ASSIGN_OR_RETURN(auto n, r.read<std::uint64_t>());
  if (n > kMaxArrayElements) {
    return corrupt_file("GGUF array '" + json_util::printable(key) + "' has " + std::to_string(n) + " elements (limit " +
                        std::to_string(kMaxArrayElements) + ")");
  }
  if (n > r.remaining() / scalar_size(v.elem_type)) {
    return corrupt_file("GGUF array '" + json_util::printable(key) + "' claims " + std::to_string(n) +
                        " elements, more than the file holds");
  }
  v.array.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i) {
    PEREGRINE_ASSIGN_OR_RETURN(auto e, read_scalar(r, v.elem_type));
    v.array.push_back(std::move(e));
  }
  return v;
}

Expected<std::int64_t> scalar_to_int(const GgufScalar& s, const std::string& key) {
  if (auto* u = std::get_if<std::uint64_t>(&s)) {
    if (*u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return corrupt_file("GGUF key '" + json_util::printable(key) + "' is too large");
    }
    return static_cast<std::int64_t>(*u);
  }
  if (auto* i = std::get_if<std::int64_t>(&s)) return *i;
  return corrupt_file("GGUF key '" + json_util::printable(key) + "' is not an integer");
}

Expected<double> scalar_to_double(const GgufScalar& s, const std::string& key) {
  if (auto* d = std::get_if<double>(&s)) return *d;
  PEREGRINE_ASSIGN_OR_RETURN(auto i, scalar_to_int(s, key));
  return static_cast<double>(i);
}

struct Header {
  std::uint32_t version = 0;
  std::uint64_t n_tensors = 0;
  std::uint64_t n_kv = 0;
};

Expected<Header> read_header(ByteReader& r, const std::string& what) {
  Header h;
  PEREGRINE_ASSIGN_OR_RETURN(auto magic, r.read<std::uint32_t>());
  if (magic != kGgufMagic) return corrupt_file(what + " is not a GGUF file (bad magic)");
  PEREGRINE_ASSIGN_OR_RETURN(h.version, r.read<std::uint32_t>());
  if (h.version < 2 || h.version > 3) {
    return unsupported(what + ": GGUF version " + std::to_string(h.version) +
                       " is not supported (only v2 and v3)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(h.n_tensors, r.read<std::uint64_t>());
  PEREGRINE_ASSIGN_OR_RETURN(h.n_kv, r.read<std::uint64_t>());
  if (h.n_kv > r.remaining() / kMinKvBytes) {
    return corrupt_file(what + ": GGUF metadata count " + std::to_string(h.n_kv) +
                        " is larger than the file could hold (truncated or corrupt)");
  }
  if (h.n_tensors > r.remaining() / kMinTensorInfoBytes) {
    return corrupt_file(what + ": GGUF tensor count " + std::to_string(h.n_tensors) +
                        " is larger than the file could hold (truncated or corrupt)");
  }
  return h;
}

struct RawTensorInfo {
  TensorView view;
  std::uint64_t offset = 0;
};

Expected<RawTensorInfo> read_tensor_info(ByteReader& r) {
  RawTensorInfo info;
  PEREGRINE_ASSIGN_OR_RETURN(info.view.name, read_gguf_string(r));
  const std::string& name = info.view.name;
  PEREGRINE_ASSIGN_OR_RETURN(auto n_dims, r.read<std::uint32_t>());
  if (n_dims == 0 || n_dims > kMaxDims) {
    return corrupt_file("GGUF tensor '" + json_util::printable(name) + "' has " + std::to_string(n_dims) + " dims");
  }
  std::uint64_t numel = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    PEREGRINE_ASSIGN_OR_RETURN(auto dim, r.read<std::uint64_t>());
    if (dim == 0 || dim > (std::uint64_t{1} << 40) || numel > (std::uint64_t{1} << 42) / dim) {
      return corrupt_file("GGUF tensor '" + json_util::printable(name) + "' has an absurd dim " + std::to_string(dim));
    }
    numel *= dim;
    info.view.shape.insert(info.view.shape.begin(), static_cast<std::int64_t>(dim));
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto type, r.read<std::uint32_t>());
  auto dtype = dtype_from_ggml_type(type);
  if (!dtype) {
    return unsupported("GGUF tensor '" + json_util::printable(name) + "' has ggml type " + ggml_type_label(type) +
                       ", which Peregrine does not read (supported: " + supported_ggml_types() + ")");
  }
  info.view.dtype = *dtype;
  auto row_bytes = dtype_row_bytes(*dtype, static_cast<std::uint64_t>(info.view.row_length()));
  if (!row_bytes) {
    if (const auto sparse = sparse_nm_format(*dtype)) {
      return corrupt_file("GGUF tensor '" + json_util::printable(name) + "' row length " +
                          std::to_string(info.view.row_length()) + " does not fit " + std::string(dtype_name(*dtype)) +
                          " (a multiple of " + std::to_string(sparse->m) + " whose kept values are whole " +
                          std::string(dtype_name(sparse->kept)) + " blocks)");
    }
    return corrupt_file("GGUF tensor '" + json_util::printable(name) + "' row length " +
                        std::to_string(info.view.row_length()) + " is not a multiple of the " +
                        std::string(dtype_name(*dtype)) + " block size " +
                        std::to_string(dtype_block_size(*dtype)));
  }
  info.view.nbytes = *row_bytes * static_cast<std::size_t>(info.view.n_rows());
  PEREGRINE_ASSIGN_OR_RETURN(info.offset, r.read<std::uint64_t>());
  return info;
}

Expected<std::uint64_t> alignment_of(const std::map<std::string, GgufValue>& md) {
  auto it = md.find("general.alignment");
  if (it == md.end()) return kDefaultAlignment;
  PEREGRINE_ASSIGN_OR_RETURN(auto a, scalar_to_int(it->second.scalar, "general.alignment"));
  if (a <= 0 || (a & (a - 1)) != 0 || a > 65536) {
    return corrupt_file("GGUF general.alignment " + std::to_string(a) + " is not a power of two");
  }
  return static_cast<std::uint64_t>(a);
}

/// Prefixes `what` (the file) to an error raised without it.
Status in_file(const std::string& what, const Status& st) {
  if (st.message().rfind(what, 0) == 0) return st;
  return {st.code(), what + ": " + st.message()};
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  if (path.ends_with(".gguf")) return true;
  auto file = MappedFile::open(path);
  if (!file) return false;
  const auto b = (*file)->bytes();
  return b.size() >= 4 && b[0] == 'G' && b[1] == 'G' && b[2] == 'U' && b[3] == 'F';
}

std::optional<DType> dtype_from_ggml_type(std::uint32_t ggml_type) {
  for (const auto& [id, t] : kGgmlTypes) {
    if (id == ggml_type) return t;
  }
  return std::nullopt;
}

std::optional<std::uint32_t> ggml_type_of(DType t) {
  for (const auto& [id, d] : kGgmlTypes) {
    if (d == t) return id;
  }
  return std::nullopt;
}

Expected<GgufFile> GgufFile::open(const std::string& path) {
  PEREGRINE_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  PEREGRINE_ASSIGN_OR_RETURN(GgufFile g, parse(file->bytes(), path));
  g.file_ = std::move(file);
  return g;
}

Expected<GgufFile> GgufFile::parse(std::span<const std::uint8_t> bytes, const std::string& what) {
  ByteReader r(bytes, what);
  PEREGRINE_ASSIGN_OR_RETURN(auto header, read_header(r, what));
  GgufFile g;
  g.version_ = header.version;
  for (std::uint64_t i = 0; i < header.n_kv; ++i) {
    PEREGRINE_ASSIGN_OR_RETURN(auto key, read_gguf_string(r));
    auto value = read_value(r, key);
    if (!value) return in_file(what, value.status());
    if (!g.metadata_.emplace(key, std::move(value).value()).second) {
      return corrupt_file(what + ": duplicate GGUF metadata key '" + json_util::printable(key) + "'");
    }
  }
  std::vector<RawTensorInfo> infos;
  std::set<std::string> names;
  for (std::uint64_t i = 0; i < header.n_tensors; ++i) {
    auto parsed = read_tensor_info(r);
    if (!parsed) return in_file(what, parsed.status());
    RawTensorInfo info = std::move(parsed).value();
    if (!names.insert(info.view.name).second) {
      return corrupt_file(what + ": duplicate GGUF tensor '" + json_util::printable(info.view.name) + "'");
    }
    infos.push_back(std::move(info));
  }
  auto aligned = alignment_of(g.metadata_);
  if (!aligned) return in_file(what, aligned.status());
  const std::uint64_t alignment = *aligned;
  const std::uint64_t data_start = (r.offset() + alignment - 1) / alignment * alignment;
  if (data_start > bytes.size() && !infos.empty()) {
    return corrupt_file(what + " is truncated before its tensor data");
  }
  for (auto& info : infos) {
    if (info.offset % alignment != 0) {
      return corrupt_file(what + ": tensor '" + json_util::printable(info.view.name) + "' offset is not aligned");
    }
    if (info.offset > bytes.size() - data_start ||
        info.view.nbytes > bytes.size() - data_start - info.offset) {
      return corrupt_file(what + ": tensor '" + json_util::printable(info.view.name) +
                          "' extends past the end of the file (truncated?)");
    }
    info.view.data = bytes.data() + data_start + info.offset;
    if (sparse_nm_format(info.view.dtype)) {
      if (Status st = validate_sparse_nm(info.view); !st.is_ok()) return in_file(what, st);
    }
    g.tensors_.push_back(std::move(info.view));
  }
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

Expected<std::int64_t> GgufFile::get_int(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return not_found("GGUF key '" + json_util::printable(key) + "' is missing");
  return scalar_to_int(v->scalar, key);
}

Expected<double> GgufFile::get_float(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return not_found("GGUF key '" + json_util::printable(key) + "' is missing");
  return scalar_to_double(v->scalar, key);
}

Expected<std::string> GgufFile::get_string(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return not_found("GGUF key '" + json_util::printable(key) + "' is missing");
  if (auto* s = std::get_if<std::string>(&v->scalar); s && v->type == GgufType::kString) return *s;
  return corrupt_file("GGUF key '" + json_util::printable(key) + "' is not a string");
}

Expected<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return not_found("GGUF key '" + json_util::printable(key) + "' is missing");
  if (v->type != GgufType::kArray || v->elem_type != GgufType::kString) {
    return corrupt_file("GGUF key '" + json_util::printable(key) + "' is not a string array");
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const auto& e : v->array) out.push_back(std::get<std::string>(e));
  return out;
}

Expected<std::vector<double>> GgufFile::get_number_array(const std::string& key) const {
  const auto* v = find(key);
  if (!v) return not_found("GGUF key '" + json_util::printable(key) + "' is missing");
  if (v->type != GgufType::kArray || v->elem_type == GgufType::kString ||
      v->elem_type == GgufType::kBool) {
    return corrupt_file("GGUF key '" + json_util::printable(key) + "' is not a numeric array");
  }
  std::vector<double> out;
  out.reserve(v->array.size());
  for (const auto& e : v->array) {
    PEREGRINE_ASSIGN_OR_RETURN(auto d, scalar_to_double(e, key));
    out.push_back(d);
  }
  return out;
}

}  // namespace peregrine
