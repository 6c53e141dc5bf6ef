// The data section of a tensor file being written (shared by the GGUF and safetensors
// writers): tensors are declared first, so that the header can list their offsets, then their
// bytes are streamed to the file in declaration order, each tensor padded to an alignment.
// Nothing but the header is held in memory, so models larger than RAM can be written.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/output_file.h"
#include "peregrine/core/status.h"

namespace peregrine {

/// A declared tensor and where its bytes go (its element type is the writer's business).
struct TensorEntry {
  std::string name;
  std::vector<std::int64_t> shape;  // outermost first (PyTorch order)
  std::uint64_t offset = 0;         // bytes from the start of the data section
  std::uint64_t nbytes = 0;         // shape × element type, without padding
};

/// Bytes of one row (the innermost dim of `shape`) of `dtype`; 0 for an empty shape or a dim
/// < 1 (which TensorDataWriter::add rejects). Errors: kInvalidArgument naming tensor `name` when
/// the row is not a whole number of the dtype's blocks (or `dtype` is kInt, whose rows depend on
/// QuantParams).
Expected<std::uint64_t> dtype_row_bytes_of(const std::string& name, DType dtype, const std::vector<std::int64_t>& shape);

class TensorDataWriter {
 public:
  /// `alignment` (bytes, >= 1): where each tensor starts, relative to the data section.
  explicit TensorDataWriter(std::uint64_t alignment) : alignment_(alignment) {}

  /// Declares the next tensor, `row_bytes` bytes per row of its innermost dim. Errors:
  /// kInvalidArgument (empty or duplicate name, no dims or more than 4, a dim < 1 or more than
  /// 2^42 values (GGUF's reader limit), or called after start()).
  Status add(const std::string& name, std::vector<std::int64_t> shape, std::uint64_t row_bytes);
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  /// Whether start() has run (the header is written; no more tensors can be declared).
  bool started() const { return file_.has_value(); }

  /// Creates `path` and writes `header`, which must end where the data section starts.
  /// Errors: kInvalidArgument (called twice), kIoError (cannot create or write the file).
  Status start(const std::string& path, std::span<const std::uint8_t> header);
  /// Appends bytes of the current tensor (one call or several); when a tensor is complete its
  /// padding is written and the next one becomes current. Errors: kInvalidArgument (before
  /// start(), or more bytes than the current tensor has left), kIoError.
  Status write(std::span<const std::uint8_t> bytes);
  /// Checks that every declared byte was written and closes the file; without a successful
  /// finish() the partial file is removed. Errors: kInvalidArgument (naming the first tensor
  /// not fully written), kIoError.
  Status finish();

 private:
  std::uint64_t aligned(std::uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  std::uint64_t alignment_;
  std::vector<TensorEntry> tensors_;
  std::set<std::string> names_;
  std::uint64_t end_ = 0;  // data section bytes declared so far, padding included
  std::optional<OutputFile> file_;
  std::size_t current_ = 0;        // index of the tensor being written
  std::uint64_t current_done_ = 0;  // its bytes written so far
};

}  // namespace peregrine
