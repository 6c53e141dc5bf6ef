// A model's weights as mutable f32 tensors: the working copy that smoothing (SmoothQuant, AWQ),
// rotation (QuaRot) and sequential calibration rewrite before the final encoding.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"

namespace peregrine {

class FloatModel {
 public:
  /// Decodes every tensor of `m` (any dtype, kInt included) to an owned f32 copy, keeping
  /// m's config, format, path and GGUF metadata (tokenizer) for writing the result.
  /// Errors: kInvalidArgument when a tensor's bytes do not fit its shape.
  static Expected<FloatModel> from(const ModelFile& m);

  const ModelConfig& config() const { return source_.config; }
  ModelConfig& config() { return source_.config; }
  /// The model this copy was made from, with config() (tensors: the original views).
  const ModelFile& source() const { return source_; }

  bool has(const std::string& name) const { return data_.count(name) != 0; }
  /// f32 values [numel] of the canonical tensor `name` (row-major, shape(name)).
  /// Precondition: has(name).
  std::span<float> tensor(const std::string& name);
  std::span<const float> tensor(const std::string& name) const;
  /// Shape, outermost first ({out, in} for a Linear weight). Precondition: has(name).
  const std::vector<std::int64_t>& shape(const std::string& name) const;
  /// Adds (or replaces) a tensor, e.g. output.weight when untying the LM head.
  void set(const std::string& name, std::vector<std::int64_t> shape, std::vector<float> values);
  /// Removes a tensor (structured pruning). No-op when absent.
  void erase(const std::string& name) { data_.erase(name); }
  /// Moves tensor `from` to the name `to` (replacing any tensor there). Precondition: has(from).
  void rename(const std::string& from, const std::string& to);
  /// Names of all tensors, sorted.
  std::vector<std::string> names() const;

  /// A ModelFile of F32 views aliasing this model's buffers (later edits of values are visible
  /// through it; it keeps the buffers alive), with config(). For calibration forwards.
  ModelFile view() const;

 private:
  struct Tensor {
    std::vector<std::int64_t> shape;
    std::shared_ptr<std::vector<float>> values;
  };
  ModelFile source_;
  std::map<std::string, Tensor> data_;
};

}  // namespace peregrine
