// What the draft-head folders share (spec/medusa_heads.h, spec/eagle_head.h): a folder of
// config.json plus one safetensors file of named f32 tensors, written as F32 and read back from
// F32 / F16 / BF16.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "peregrine/core/status.h"
#include "peregrine/formats/safetensors/safetensors.h"

namespace peregrine::head_folder {

/// One tensor of a layout: its name and shape (outermost first).
struct Entry {
  std::string name;
  std::vector<std::int64_t> shape;
};

/// Every tensor of `layout` is in `tensors` with its shape's number of values. Errors:
/// kInvalidArgument ("<who>: tensor NAME is missing or not N values").
Status check(const std::vector<Entry>& layout, const std::map<std::string, std::vector<float>>& tensors, const std::string& who);

/// Writes `dir` (created): `config_file` (`config`, indented) and `dir`/`file` holding every
/// tensor of `layout`, in that order, as F32 from `tensors` ("format": "pt" metadata, which
/// transformers / safetensors.torch expect). Errors: kInvalidArgument ("<who>: tensor NAME is
/// missing or not N values"), kIoError.
Status write(const std::string& dir, const nlohmann::json& config, const std::string& file, const std::vector<Entry>& layout,
             const std::map<std::string, std::vector<float>>& tensors, const std::string& who,
             const std::string& config_file = "config.json");

/// The shortest decimal that reads back as `f` (1e-05, not 9.999999747378752e-06, for a float
/// written as a JSON double).
double shortest_decimal(float f);

/// Tensor `name` of `file` decoded to f32 row-major when it is F32 / F16 / BF16 of exactly
/// `shape`; nullopt when it is missing or of another dtype or shape.
std::optional<std::vector<float>> read_f32(const SafetensorsFile& file, const std::string& name,
                                           const std::vector<std::int64_t>& shape);

}  // namespace peregrine::head_folder
