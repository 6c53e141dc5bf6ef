#include "peregrine/formats/safetensors/safetensors_writer.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "formats/tensor_data_writer.h"
#include "peregrine/formats/safetensors/safetensors.h"

namespace peregrine {

SafetensorsWriter::SafetensorsWriter() : data_(std::make_unique<TensorDataWriter>(1)) {}
SafetensorsWriter::~SafetensorsWriter() = default;
SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&&) noexcept = default;
SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&&) noexcept = default;

void SafetensorsWriter::add_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

Status SafetensorsWriter::add_tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape) {
  const auto type = safetensors_dtype_of(dtype);
  if (!type) {
    return unsupported("tensor '" + name + "': safetensors cannot hold " + std::string(dtype_name(dtype)) +
                       " (only f32, f16, bf16)");
  }
  return add_tensor(name, *type, std::move(shape));
}

Status SafetensorsWriter::add_tensor(const std::string& name, SafetensorsDtype dtype, std::vector<std::int64_t> shape) {
  if (name == "__metadata__") return invalid_argument("'__metadata__' is not a tensor name");
  const std::int64_t n = shape.empty() ? 0 : std::max<std::int64_t>(shape.back(), 0);
  PEREGRINE_RETURN_IF_ERROR(data_->add(name, std::move(shape), static_cast<std::uint64_t>(n) * safetensors_dtype_bytes(dtype)));
  dtypes_.push_back(dtype);
  return Status::ok();
}

Status SafetensorsWriter::begin(const std::string& path) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  for (std::size_t i = 0; i < dtypes_.size(); ++i) {
    const TensorEntry& t = data_->tensors()[i];
    h[t.name] = {{"dtype", std::string(safetensors_dtype_name(dtypes_[i]))},
                 {"shape", t.shape},
                 {"data_offsets", {t.offset, t.offset + t.nbytes}}};
  }
  std::string json = h.dump();
  json.resize((8 + json.size() + 7) / 8 * 8 - 8, ' ');
  std::vector<std::uint8_t> header(8 + json.size());
  const auto n = static_cast<std::uint64_t>(json.size());
  std::memcpy(header.data(), &n, 8);
  std::memcpy(header.data() + 8, json.data(), json.size());
  return data_->start(path, header);
}

Status SafetensorsWriter::write_tensor_data(std::span<const std::uint8_t> bytes) { return data_->write(bytes); }

Status SafetensorsWriter::finish() { return data_->finish(); }

}  // namespace peregrine
