#include "peregrine/formats/safetensors_writer.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "formats/tensor_data_writer.h"
#include "peregrine/formats/safetensors.h"

namespace peregrine {

SafetensorsWriter::SafetensorsWriter() : data_(std::make_unique<TensorDataWriter>(1)) {}
SafetensorsWriter::~SafetensorsWriter() = default;
SafetensorsWriter::SafetensorsWriter(SafetensorsWriter&&) noexcept = default;
SafetensorsWriter& SafetensorsWriter::operator=(SafetensorsWriter&&) noexcept = default;

void SafetensorsWriter::add_metadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

Status SafetensorsWriter::add_tensor(const std::string& name, DType dtype, std::vector<std::int64_t> shape) {
  if (!safetensors_dtype_name(dtype)) {
    return unsupported("tensor '" + name + "': safetensors cannot hold " + std::string(dtype_name(dtype)) +
                       " (only f32, f16, bf16)");
  }
  if (name == "__metadata__") return invalid_argument("'__metadata__' is not a tensor name");
  return data_->add(name, dtype, std::move(shape));
}

Status SafetensorsWriter::begin(const std::string& path) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata_.empty()) h["__metadata__"] = metadata_;
  for (const TensorEntry& t : data_->tensors()) {
    h[t.name] = {{"dtype", std::string(*safetensors_dtype_name(t.dtype))},
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
