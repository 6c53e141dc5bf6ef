#include "peregrine/spec/medusa_heads.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/head_folder.h"
#include "peregrine/core/text_file.h"
#include "peregrine/formats/safetensors/safetensors.h"

namespace peregrine {
namespace {

constexpr const char* kWeights = "medusa_lm_head.safetensors";

std::string block(std::int64_t k, std::int64_t j) { return std::to_string(k) + "." + std::to_string(j) + "."; }

}  // namespace

std::vector<std::string> MedusaHeads::names() const {
  std::vector<std::string> out;
  for (std::int64_t k = 0; k < heads; ++k) {
    for (std::int64_t j = 0; j < layers; ++j) {
      out.push_back(block(k, j) + "linear.weight");
      out.push_back(block(k, j) + "linear.bias");
    }
    out.push_back(block(k, layers) + "weight");
  }
  return out;
}

std::vector<std::int64_t> MedusaHeads::shape(const std::string& name) const {
  for (std::int64_t k = 0; k < heads; ++k) {
    for (std::int64_t j = 0; j < layers; ++j) {
      if (name == block(k, j) + "linear.weight") return {hidden, hidden};
      if (name == block(k, j) + "linear.bias") return {hidden};
    }
    if (name == block(k, layers) + "weight") return {vocab, hidden};
  }
  return {};
}

std::vector<head_folder::Entry> layout_of(const MedusaHeads& m) {
  std::vector<head_folder::Entry> out;
  for (const std::string& name : m.names()) out.push_back({name, m.shape(name)});
  return out;
}

Status MedusaHeads::validate() const { return head_folder::check(layout_of(*this), tensors, "Medusa heads"); }

Status save_medusa_heads(const MedusaHeads& m, const std::string& dir) {
  const std::vector<head_folder::Entry> layout = layout_of(m);
  const nlohmann::json config = {{"medusa_num_heads", m.heads}, {"medusa_num_layers", m.layers}, {"hidden_size", m.hidden},
                                 {"vocab_size", m.vocab},        {"base_model_name_or_path", m.base_model}};
  return head_folder::write(dir, config, kWeights, layout, m.tensors, "save_medusa_heads");
}

Expected<MedusaHeads> load_medusa_heads(const std::string& dir, std::int64_t hidden, std::int64_t vocab) {
  const std::string config_path = dir + "/config.json";
  if (!std::filesystem::exists(config_path)) return not_found(dir + " has no config.json (not a Medusa head folder)");
  PEREGRINE_ASSIGN_OR_RETURN(const std::string text, read_text_file(config_path));
  MedusaHeads m;
  try {
    const nlohmann::json c = nlohmann::json::parse(text);
    m.heads = c.at("medusa_num_heads").get<std::int64_t>();
    m.layers = c.value("medusa_num_layers", std::int64_t{1});
    m.base_model = c.value("base_model_name_or_path", std::string());
  } catch (const nlohmann::json::exception& e) {
    return corrupt_file(config_path + ": " + e.what());
  }
  if (m.heads < 1 || m.heads > 16 || m.layers < 0 || m.layers > 8) {
    return corrupt_file(config_path + ": medusa_num_heads must be in [1, 16] and medusa_num_layers in [0, 8]");
  }
  PEREGRINE_ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::open(dir + "/" + kWeights));
  const SafetensorsTensor* head = file.find(block(0, m.layers) + "weight");
  if (head == nullptr || head->shape.size() != 2) return corrupt_file(dir + ": no " + block(0, m.layers) + "weight [vocab, hidden]");
  m.vocab = head->shape[0];
  m.hidden = head->shape[1];
  if (m.hidden != hidden || m.vocab != vocab) {
    return invalid_argument(dir + ": the heads are for hidden size " + std::to_string(m.hidden) + " and " + std::to_string(m.vocab) +
                            " tokens; the target has " + std::to_string(hidden) + " and " + std::to_string(vocab));
  }
  for (const std::string& name : m.names()) {
    auto values = head_folder::read_f32(file, name, m.shape(name));
    if (!values) return corrupt_file(dir + ": tensor " + name + " is missing or not F32/F16/BF16 of its shape");
    m.tensors[name] = std::move(*values);
  }
  return m;
}

}  // namespace peregrine
