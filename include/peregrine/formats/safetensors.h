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
// types, dtype F32/F16/BF16, dims non-negative with no overflow, end - begin == numel * dtype
// size, offsets inside the data buffer, and (as the spec requires) the tensors covering the data
// buffer exactly, without overlaps or holes.
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

/// A parsed safetensors file. Tensor views point into the mapping, which the object keeps alive.
/// Views are row-major, outermost dim first (PyTorch order, as stored). Note: the data of a
/// tensor is only as aligned as the file makes it (the official writer pads the header to a
/// multiple of 8 bytes; nothing in the format guarantees it), so readers of `data` must not
/// assume alignment to the element size.
class SafetensorsFile {
 public:
  /// Maps and validates `path`. Errors: those of MappedFile::open; kCorruptFile (truncated,
  /// header length out of range, malformed/ill-typed JSON, duplicate keys, bad shapes or
  /// offsets, byte counts not matching shape × dtype, overlaps or holes in the data buffer);
  /// kUnsupported (a dtype other than F32/F16/BF16, named in the message).
  static Expected<SafetensorsFile> open(const std::string& path);
  /// Parses an in-memory image (used by the fuzzer and by open()); `bytes` must outlive the
  /// result. `what` names the source in error messages. Same errors as open().
  static Expected<SafetensorsFile> parse(std::span<const std::uint8_t> bytes, const std::string& what);

  /// Tensors sorted by name.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  /// Tensor by name, or nullptr.
  const TensorView* find(const std::string& name) const;
  /// The "__metadata__" entries (empty if absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// The mapping (null for parse()).
  const std::shared_ptr<const MappedFile>& file() const { return file_; }

 private:
  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorView> tensors_;
};

/// safetensors dtype string → DType for the types Peregrine reads ("F32", "F16", "BF16");
/// nullopt otherwise.
std::optional<DType> dtype_from_safetensors(std::string_view name);
/// DType → safetensors dtype string ("F32", "F16", "BF16"); nullopt for the block-quantized
/// types, which safetensors cannot hold.
std::optional<std::string_view> safetensors_dtype_name(DType t);

}  // namespace peregrine
