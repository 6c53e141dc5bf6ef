// GGUF v3 writer: metadata key/values of every GGUF type, tensor infos, and tensor data
// streamed to the file one tensor after another (a model never has to fit in memory).
//
// Spec: ggml/docs/gguf.md. Layout written: "GGUF", u32 version 3, u64 tensor_count, u64
// kv_count, the key/values in the order added (general.alignment first, written by the writer),
// tensor infos in the order declared (name, u32 n_dims, u64 dims innermost-first, u32 ggml
// type, u64 offset), zero padding to the alignment, then each tensor's bytes padded to the
// alignment. GgufFile (gguf.h) reads the result.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/dtype.h"
#include "peregrine/core/status.h"
#include "peregrine/formats/gguf/gguf.h"

namespace peregrine {

class TensorDataWriter;

/// Metadata values for GgufWriter::add (the types llama.cpp's llama metadata uses).
GgufValue gguf_u32(std::uint32_t v);
GgufValue gguf_i32(std::int32_t v);
GgufValue gguf_f32(float v);
GgufValue gguf_bool(bool v);
GgufValue gguf_string(std::string v);
/// An array of `elem_type` scalars (not kArray): unsigned values as uint64_t, signed as
/// int64_t, floats as double, bools as bool, strings as std::string (GgufScalar's variant).
GgufValue gguf_array(GgufType elem_type, std::vector<GgufScalar> elems);

/// Usage: add() metadata and add_tensor() infos, begin(path), write_tensor_data() the tensors'
/// bytes in declaration order (in one call per tensor or in pieces), finish(). A writer
/// destroyed before a successful finish() removes the partial file.
class GgufWriter {
 public:
  /// The data section and every tensor are aligned to kAlignment bytes (general.alignment).
  static constexpr std::uint32_t kAlignment = 32;

  GgufWriter();
  ~GgufWriter();
  GgufWriter(GgufWriter&&) noexcept;
  GgufWriter& operator=(GgufWriter&&) noexcept;

  /// Adds a metadata key/value. A value read by GgufFile can be copied as is (its scalars are
  /// narrowed back to `type`). Errors: kInvalidArgument (duplicate key, "general.alignment"
  /// (the writer's), a scalar of the wrong kind or out of its type's range, an array of
  /// arrays, or after begin()).
  Status add(const std::string& key, const GgufValue& value);
  /// Declares a tensor: `shape` outermost-first (PyTorch order; written innermost-first).
  /// Errors: kUnsupported (a dtype without a ggml type: I8, F8, kInt); kInvalidArgument (empty
  /// or duplicate name, 0 or > 4 dims, a dim < 1, rows not a multiple of the dtype's block
  /// size, after begin()).
  Status add_tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape);

  /// Creates `path` and writes the header, metadata and tensor infos.
  /// Errors: kIoError (cannot create or write), kInvalidArgument (called twice).
  Status begin(const std::string& path);
  /// Appends bytes of the current tensor (see TensorDataWriter). Errors: kInvalidArgument
  /// (before begin(), more bytes than declared), kIoError.
  Status write_tensor_data(std::span<const std::uint8_t> bytes);
  /// Checks every tensor is complete and closes the file. Errors: kInvalidArgument (a tensor
  /// short of bytes), kIoError.
  Status finish();

 private:
  std::vector<std::uint8_t> kv_;  // serialized key/values after general.alignment
  std::uint64_t n_kv_ = 0;
  std::set<std::string> keys_;
  std::vector<std::uint32_t> ggml_types_;  // of the declared tensors, in order
  std::unique_ptr<TensorDataWriter> data_;
};

}  // namespace peregrine
