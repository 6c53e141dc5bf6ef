#include "formats/head_folder.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "peregrine/formats/safetensors/safetensors_writer.h"
#include "peregrine/quant/dequantize.h"

namespace peregrine::head_folder {

Status check(const std::vector<Entry>& layout, const std::map<std::string, std::vector<float>>& tensors, const std::string& who) {
  for (const Entry& e : layout) {
    const auto it = tensors.find(e.name);
    std::int64_t n = 1;
    for (std::int64_t d : e.shape) n *= d;
    if (it == tensors.end() || static_cast<std::int64_t>(it->second.size()) != n) {
      return invalid_argument(who + ": tensor " + e.name + " is missing or not " + std::to_string(n) + " values");
    }
  }
  return Status::ok();
}

Status write(const std::string& dir, const nlohmann::json& config, const std::string& file, const std::vector<Entry>& layout,
             const std::map<std::string, std::vector<float>>& tensors, const std::string& who, const std::string& config_file) {
  PEREGRINE_RETURN_IF_ERROR(check(layout, tensors, who));
  SafetensorsWriter w;
  w.add_metadata("format", "pt");
  for (const Entry& e : layout) PEREGRINE_RETURN_IF_ERROR(w.add_tensor(e.name, DType::kF32, e.shape));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create " + dir + ": " + ec.message());
  std::ofstream out(dir + "/" + config_file);
  out << config.dump(2) << "\n";
  if (!out) return io_error("cannot write " + dir + "/" + config_file);
  PEREGRINE_RETURN_IF_ERROR(w.begin(dir + "/" + file));
  for (const Entry& e : layout) {
    const std::vector<float>& v = tensors.at(e.name);
    PEREGRINE_RETURN_IF_ERROR(w.write_tensor_data({reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(float)}));
  }
  return w.finish();
}

double shortest_decimal(float f) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

std::optional<std::vector<float>> read_f32(const SafetensorsFile& file, const std::string& name,
                                           const std::vector<std::int64_t>& shape) {
  const SafetensorsTensor* t = file.find(name);
  const auto view = t != nullptr ? t->weight_view() : std::nullopt;
  if (!view || t->shape != shape) return std::nullopt;
  std::vector<float> values(static_cast<std::size_t>(t->numel()));
  const std::int64_t cols = shape.empty() ? 1 : shape.back();
  for (std::int64_t r = 0; cols > 0 && r < t->numel() / cols; ++r) {
    dequantize_row(*view, r, std::span<float>(values).subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)));
  }
  return values;
}

}  // namespace peregrine::head_folder
