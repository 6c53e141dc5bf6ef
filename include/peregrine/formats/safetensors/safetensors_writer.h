// safetensors writer: JSON header with every tensor's dtype, shape and data offsets, then the
// tensors' bytes streamed one after another (a model never has to fit in memory).
//
// Spec: huggingface/safetensors (README "Format"): u64 little-endian header length N, N bytes
// of JSON (padded with spaces so the data starts at a multiple of 8, as the reference writer
// does), then the data buffer, which the tensors tile exactly in declaration order.
// SafetensorsFile (safetensors.h) reads the result.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/formats/safetensors/safetensors.h"

namespace peregrine {

class TensorDataWriter;

/// Usage: add_metadata()/add_tensor(), begin(path), write_tensor_data() in declaration order,
/// finish(). A writer destroyed before a successful finish() removes the partial file.
class SafetensorsWriter {
 public:
  SafetensorsWriter();
  ~SafetensorsWriter();
  SafetensorsWriter(SafetensorsWriter&&) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) noexcept;

  /// A "__metadata__" string entry (e.g. "format": "pt", which transformers expects).
  void add_metadata(const std::string& key, const std::string& value);
  /// Declares a tensor, shape outermost-first. Errors: kUnsupported (a DType other than
  /// F32/F16/BF16: safetensors has no block-quantized or row-scaled dtypes); kInvalidArgument
  /// (empty, duplicate or "__metadata__" name, 0 or > 4 dims, a dim < 1, after begin()).
  Status add_tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape);
  /// Declares a tensor of any safetensors element type (e.g. I32 for GPTQ's qweight).
  /// Errors: kInvalidArgument as above.
  Status add_tensor(const std::string& name, SafetensorsDtype dtype, std::vector<std::int64_t> shape);

  /// Creates `path` and writes the header. Errors: kIoError, kInvalidArgument (called twice).
  Status begin(const std::string& path);
  /// Appends bytes of the current tensor. Errors: kInvalidArgument (before begin(), more
  /// bytes than declared), kIoError.
  Status write_tensor_data(std::span<const std::uint8_t> bytes);
  /// Checks every tensor is complete and closes the file. Errors: kInvalidArgument, kIoError.
  Status finish();

 private:
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsDtype> dtypes_;  // of the declared tensors, in order
  std::unique_ptr<TensorDataWriter> data_;
};

}  // namespace peregrine
