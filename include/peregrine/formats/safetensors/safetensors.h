// safetensors reader: JSON header + raw little-endian tensor data over a memory-mapped file.
//
// Spec: huggingface/safetensors (README "Format"). Layout: u64 little-endian N, N bytes of a
// UTF-8 JSON object (may be padded with trailing spaces), then the data buffer. Each header key
// other than "__metadata__" names a tensor: {"dtype": "F32", "shape": [d0, d1, ...],
// "data_offsets": [begin, end]} with byte offsets relative to the start of the data buffer.
// "__metadata__" is an optional object of string → string.
//
// Everything is validated before any tensor is exposed: N inside the file and at most
// kMaxSafetensorsHeaderBytes, the header well-formed JSON with no duplicate keys and the right
// types, dtype one of SafetensorsDtype, dims non-negative with no overflow, end - begin == numel
// * dtype size, offsets inside the data buffer, and (as the spec requires) the tensors covering
// the data buffer exactly, without overlaps or holes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "peregrine/core/mapped_file.h"
#include "peregrine/core/status.h"
#include "peregrine/core/tensor.h"

namespace peregrine {

/// Largest accepted JSON header (bytes); the reference implementation uses the same cap.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// Element types Peregrine reads: the float types of weights, and the raw types of the quantized
/// layouts (I32: GPTQ / AWQ qweight, qzeros, g_idx; I8, F8_E4M3, F8_E5M2: int8 / FP8 weights),
/// which hf_model.h repacks into the runtime layouts of core/dtype.h.
enum class SafetensorsDtype : std::uint8_t { kF32, kF16, kBF16, kI32, kI8, kF8E4M3, kF8E5M2 };

/// One tensor of a safetensors file: row-major, outermost dim first (PyTorch order, as stored),
/// `nbytes` = numel × element size at `data`. Note: the data is only as aligned as the file makes
/// it (the official writer pads the header to a multiple of 8 bytes; nothing in the format
/// guarantees it), so readers must not assume alignment to the element size.
struct SafetensorsTensor {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<std::int64_t> shape;
  const std::uint8_t* data = nullptr;
  std::size_t nbytes = 0;

  /// Product of the dims (1 for a scalar).
  std::int64_t numel() const;
  /// "[512, 64]".
  std::string shape_string() const;
  /// The tensor as a weight view (DType F32 / F16 / BF16); nullopt for the raw integer and FP8
  /// types, which have no DType of their own (kI8 / kF8* are the row-scaled runtime layouts).
  std::optional<TensorView> weight_view() const;
};

/// A parsed safetensors file. Tensors point into the mapping, which the object keeps alive.
class SafetensorsFile {
 public:
  /// Maps and validates `path`. Errors: those of MappedFile::open; kCorruptFile (truncated,
  /// header length out of range, malformed/ill-typed JSON, duplicate keys, bad shapes or
  /// offsets, byte counts not matching shape × dtype, overlaps or holes in the data buffer);
  /// kUnsupported (a dtype outside SafetensorsDtype, e.g. I64, named in the message).
  static Expected<SafetensorsFile> open(const std::string& path);
  /// Parses an in-memory image (used by the fuzzer and by open()); `bytes` must outlive the
  /// result. `what` names the source in error messages. Same errors as open().
  static Expected<SafetensorsFile> parse(std::span<const std::uint8_t> bytes, const std::string& what);

  /// Tensors sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  /// Tensor by name, or nullptr.
  const SafetensorsTensor* find(const std::string& name) const;
  /// The "__metadata__" entries (empty if absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The mapping (null for parse()).
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
};

/// safetensors dtype string ("F32", "F16", "BF16", "I32", "I8", "F8_E4M3", "F8_E5M2") →
/// SafetensorsDtype; nullopt otherwise.
std::optional<SafetensorsDtype> safetensors_dtype_from_name(std::string_view name);
/// The dtype string of `t` ("F32", …, "F8_E5M2").
std::string_view safetensors_dtype_name(SafetensorsDtype t);
/// Bytes per element of `t` (4, 2, 2, 4, 1, 1, 1).
std::size_t safetensors_dtype_bytes(SafetensorsDtype t);
/// The safetensors type of a weight DType (F32, F16, BF16); nullopt for the block-quantized and
/// row-scaled dtypes, which safetensors cannot hold as such.
std::optional<SafetensorsDtype> safetensors_dtype_of(DType t);
/// safetensors_dtype_name(*safetensors_dtype_of(t)), or nullopt.
std::optional<std::string_view> safetensors_dtype_name(DType t);

}  // namespace peregrine
