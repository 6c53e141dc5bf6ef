// GGUF v2/v3 reader: metadata key/values and tensor table over a memory-mapped file.
//
// Spec: ggml/docs/gguf.md. Layout: "GGUF" magic, u32 version, u64 tensor_count, u64 kv_count,
// kv pairs (gguf string = u64 length + bytes; typed value), tensor infos (name, u32 n_dims,
// u64 dims[n_dims] innermost-first, u32 ggml_type, u64 offset into the data section), padding
// to general.alignment (default 32), data section. Everything is validated before use: counts,
// string and array lengths, dims, dtypes, alignment, and that each tensor lies inside the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "peregrine/core/byte_reader.h"
#include "peregrine/core/mapped_file.h"
#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"

namespace peregrine {

/// GGUF metadata value types (gguf.md, enum gguf_metadata_value_type).
enum class GgufType : std::uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

/// A scalar metadata value: unsigned, signed, floating, bool or string.
using GgufScalar = std::variant<std::uint64_t, std::int64_t, double, bool, std::string>;

/// One metadata value. For kArray, `elem_type` and `array` hold the elements (arrays of arrays
/// are rejected as unsupported: no llama-family file uses them).
struct GgufValue {
  GgufType type = GgufType::kU8;
  GgufScalar scalar;
  GgufType elem_type = GgufType::kU8;
  std::vector<GgufScalar> array;
};

/// A parsed GGUF file. Tensor views point into the mapping, which the object keeps alive.
class GgufFile {
 public:
  /// Maps and validates `path`. Errors: those of MappedFile::open; kCorruptFile (bad magic,
  /// truncation, absurd counts/lengths, tensors past the end, misaligned offsets, duplicate
  /// names); kUnsupported (GGUF v1 or > v3, unknown tensor type, nested arrays);
  /// kInvalidArgument for an N:M sparse tensor whose position masks break the pattern
  /// (quant/sparse_nm.h validate_sparse_nm, naming tensor, row and group).
  static Expected<GgufFile> open(const std::string& path);
  /// Parses an in-memory image (used by the fuzzer); `bytes` must outlive the result.
  static Expected<GgufFile> parse(std::span<const std::uint8_t> bytes, const std::string& what);

  std::uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

  /// Metadata lookup; nullptr if absent.
  const GgufValue* find(const std::string& key) const;
  /// Integer value of any integer type (kNotFound if absent, kCorruptFile if wrong type).
  Expected<std::int64_t> get_int(const std::string& key) const;
  /// Float value of f32/f64 (or an integer type).
  Expected<double> get_float(const std::string& key) const;
  Expected<std::string> get_string(const std::string& key) const;
  /// String array (e.g. tokenizer.ggml.tokens).
  Expected<std::vector<std::string>> get_string_array(const std::string& key) const;
  /// Numeric array converted to double (e.g. tokenizer.ggml.scores, token_type).
  Expected<std::vector<double>> get_number_array(const std::string& key) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  std::uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<TensorView> tensors_;
};

/// Whether `path` names a GGUF file: a ".gguf" extension, or a file starting with the "GGUF"
/// magic (false when it cannot be read).
bool is_gguf_file(const std::string& path);

/// ggml type id → DType; nullopt for types Peregrine does not read.
std::optional<DType> dtype_from_ggml_type(std::uint32_t ggml_type);
/// DType → ggml type id (F32 0, F16 1, Q4_0 2, Q8_0 8, BF16 30, ...; Peregrine's N:M sparse
/// dtypes 1000..1007 as listed in core/dtype.h); nullopt for the dtypes GGUF cannot hold (I8,
/// F8, kInt).
std::optional<std::uint32_t> ggml_type_of(DType t);

}  // namespace peregrine
