#include "peregrine/formats/config_keys.h"

namespace peregrine {
namespace {

using enum ConfigKeyWritten;

constexpr ConfigKey kConfigKeys[] = {
    // field, GGUF {arch}.key, config.json field, written
    {&ModelConfig::sliding_window, "attention.sliding_window", "sliding_window", kWhenSet},
    {&ModelConfig::sliding_window_period, "attention.sliding_window_pattern", "sliding_window_pattern", kWhenNotDefault},
    {&ModelConfig::rope_theta_local, "rope.freq_base_swa", "rope_local_base_freq", kWhenSet},
    {&ModelConfig::attn_softcap, "attn_logit_softcapping", "attn_logit_softcapping", kWhenSet},
    {&ModelConfig::final_softcap, "final_logit_softcapping", "final_logit_softcapping", kWhenSet},
};

}  // namespace

std::span<const ConfigKey> config_keys() { return kConfigKeys; }

ModelConfig config_key_defaults(const Architecture& family, ConfigKeyFormat format) {
  ModelConfig d;
  apply_architecture(d, family);
  if (format == ConfigKeyFormat::kGguf) {
    d.attn_softcap = family.gguf_attn_softcap;
    d.final_softcap = family.gguf_final_softcap;
  }
  return d;
}

bool config_key_written(const ConfigKey& k, const ModelConfig& c, ConfigKeyFormat format) {
  const Architecture* family = find_architecture(c.arch);
  return std::visit(
      [&](auto field) {
        const auto v = c.*field;
        if (family == nullptr) return v != 0;
        const bool differs = v != config_key_defaults(*family, format).*field;
        return differs || (k.written == kWhenSet && v != 0);
      },
      k.field);
}

}  // namespace peregrine
