#include "peregrine/formats/gguf/gguf_writer.h"

#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "formats/tensor_data_writer.h"

namespace peregrine {
namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr std::uint32_t kGgufVersion = 3;

template <typename T>
void append(Bytes& b, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const std::size_t at = b.size();
  b.resize(at + sizeof v);
  std::memcpy(b.data() + at, &v, sizeof v);
}

void append_string(Bytes& b, const std::string& s) {
  append(b, static_cast<std::uint64_t>(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}

/// An integer scalar (either signedness) narrowed to T, or nullopt when out of range.
template <typename T>
std::optional<T> narrow_int(const GgufScalar& s) {
  if (const auto* u = std::get_if<std::uint64_t>(&s)) {
    if (*u <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return static_cast<T>(*u);
  } else if (const auto* i = std::get_if<std::int64_t>(&s)) {
    if (*i >= 0 ? static_cast<std::uint64_t>(*i) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
                : std::is_signed_v<T> && *i >= static_cast<std::int64_t>(std::numeric_limits<T>::min())) {
      return static_cast<T>(*i);
    }
  }
  return std::nullopt;
}

template <typename T>
bool put_int(Bytes& b, const GgufScalar& s) {
  const auto v = narrow_int<T>(s);
  if (v) append(b, *v);
  return v.has_value();
}

template <typename T>
bool put_float(Bytes& b, const GgufScalar& s) {
  const auto* d = std::get_if<double>(&s);
  if (d) append(b, static_cast<T>(*d));
  return d != nullptr;
}

/// Serializes one scalar of `type`; false if the variant holds the wrong kind or the value
/// does not fit the type.
bool put_scalar(Bytes& b, GgufType type, const GgufScalar& s) {
  switch (type) {
    case GgufType::kU8: return put_int<std::uint8_t>(b, s);
    case GgufType::kI8: return put_int<std::int8_t>(b, s);
    case GgufType::kU16: return put_int<std::uint16_t>(b, s);
    case GgufType::kI16: return put_int<std::int16_t>(b, s);
    case GgufType::kU32: return put_int<std::uint32_t>(b, s);
    case GgufType::kI32: return put_int<std::int32_t>(b, s);
    case GgufType::kU64: return put_int<std::uint64_t>(b, s);
    case GgufType::kI64: return put_int<std::int64_t>(b, s);
    case GgufType::kF32: return put_float<float>(b, s);
    case GgufType::kF64: return put_float<double>(b, s);
    case GgufType::kBool: {
      const auto* v = std::get_if<bool>(&s);
      if (v) append(b, static_cast<std::uint8_t>(*v));
      return v != nullptr;
    }
    case GgufType::kString: {
      const auto* v = std::get_if<std::string>(&s);
      if (v) append_string(b, *v);
      return v != nullptr;
    }
    case GgufType::kArray: return false;
  }
  return false;
}

Status put_value(Bytes& b, const std::string& key, const GgufValue& v) {
  const auto bad = [&key] { return invalid_argument("GGUF key '" + key + "': value does not match its type"); };
  append(b, static_cast<std::uint32_t>(v.type));
  if (v.type != GgufType::kArray) return put_scalar(b, v.type, v.scalar) ? Status::ok() : bad();
  if (v.elem_type == GgufType::kArray) return invalid_argument("GGUF key '" + key + "': arrays of arrays are not supported");
  append(b, static_cast<std::uint32_t>(v.elem_type));
  append(b, static_cast<std::uint64_t>(v.array.size()));
  for (const auto& e : v.array) {
    if (!put_scalar(b, v.elem_type, e)) return bad();
  }
  return Status::ok();
}

GgufValue scalar(GgufType type, GgufScalar s) {
  GgufValue v;
  v.type = type;
  v.scalar = std::move(s);
  return v;
}

}  // namespace

GgufValue gguf_u32(std::uint32_t v) { return scalar(GgufType::kU32, std::uint64_t{v}); }
GgufValue gguf_i32(std::int32_t v) { return scalar(GgufType::kI32, std::int64_t{v}); }
GgufValue gguf_f32(float v) { return scalar(GgufType::kF32, double{v}); }
GgufValue gguf_bool(bool v) { return scalar(GgufType::kBool, v); }
GgufValue gguf_string(std::string v) { return scalar(GgufType::kString, std::move(v)); }

GgufValue gguf_array(GgufType elem_type, std::vector<GgufScalar> elems) {
  GgufValue v;
  v.type = GgufType::kArray;
  v.elem_type = elem_type;
  v.array = std::move(elems);
  return v;
}

GgufWriter::GgufWriter() : data_(std::make_unique<TensorDataWriter>(kAlignment)) {}
GgufWriter::~GgufWriter() = default;
GgufWriter::GgufWriter(GgufWriter&&) noexcept = default;
GgufWriter& GgufWriter::operator=(GgufWriter&&) noexcept = default;

Status GgufWriter::add(const std::string& key, const GgufValue& value) {
  if (key == "general.alignment") return invalid_argument("general.alignment is written by the GGUF writer");
  if (keys_.count(key)) return invalid_argument("GGUF key '" + key + "' is added twice");
  if (data_->started()) return invalid_argument("GGUF key '" + key + "' added after the header was written");
  Bytes b;
  append_string(b, key);
  PEREGRINE_RETURN_IF_ERROR(put_value(b, key, value));
  keys_.insert(key);
  kv_.insert(kv_.end(), b.begin(), b.end());
  ++n_kv_;
  return Status::ok();
}

Status GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape) {
  const auto type = ggml_type_of(dtype);
  if (!type) {
    return unsupported("tensor '" + name + "': GGUF cannot hold " + std::string(dtype_name(dtype)) +
                       " (only f32, f16, bf16, q8_0, q4_0)");
  }
  PEREGRINE_ASSIGN_OR_RETURN(std::uint64_t row_bytes, dtype_row_bytes_of(name, dtype, shape));
  PEREGRINE_RETURN_IF_ERROR(data_->add(name, std::move(shape), row_bytes));
  ggml_types_.push_back(*type);
  return Status::ok();
}

Status GgufWriter::begin(const std::string& path) {
  Bytes h;
  append(h, std::uint32_t{0x46554747});  // "GGUF"
  append(h, kGgufVersion);
  append(h, static_cast<std::uint64_t>(data_->tensors().size()));
  append(h, n_kv_ + 1);
  append_string(h, "general.alignment");
  append(h, static_cast<std::uint32_t>(GgufType::kU32));
  append(h, kAlignment);
  h.insert(h.end(), kv_.begin(), kv_.end());
  for (std::size_t i = 0; i < data_->tensors().size(); ++i) {
    const TensorEntry& t = data_->tensors()[i];
    append_string(h, t.name);
    append(h, static_cast<std::uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) append(h, static_cast<std::uint64_t>(*it));
    append(h, ggml_types_[i]);
    append(h, t.offset);
  }
  h.resize((h.size() + kAlignment - 1) / kAlignment * kAlignment, 0);
  return data_->start(path, h);
}

Status GgufWriter::write_tensor_data(std::span<const std::uint8_t> bytes) { return data_->write(bytes); }

Status GgufWriter::finish() { return data_->finish(); }

}  // namespace peregrine
