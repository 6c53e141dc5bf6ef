// The optional hyper-parameter keys both model file formats carry the same way: one row per
// ModelConfig field, naming its GGUF key (after "{arch}.", llama.cpp's llama-arch.cpp LLM_KV_*)
// and its config.json field (transformers' config classes). The GGUF and Hugging Face readers
// and writers (formats/gguf/gguf_model.cpp, gguf_llama_metadata.cpp, formats/hf/hf_model.cpp,
// hf_config_writer.cpp) loop over this table, so a family twist that is one more such
// hyper-parameter is one more row in config_keys.cpp. Keys a format spells its own way stay in
// its reader and writer: the required shape keys, config.json's query_pre_attn_scalar,
// use_sliding_window and layer_types, the experts' names, rope_scaling.
#pragma once

#include <cstdint>
#include <span>
#include <variant>

#include "peregrine/model/spec/model_config.h"

namespace peregrine {

enum class ConfigKeyFormat : std::uint8_t { kGguf, kHf };

/// When a writer writes a key (a reader takes the default of config_key_defaults for an absent one).
enum class ConfigKeyWritten : std::uint8_t {
  kWhenSet,         // the value is non-zero, or differs from the reader's default (a 0 that
                    // would otherwise read back as the family's non-zero default)
  kWhenNotDefault,  // only when the value differs from the reader's default
};

/// One hyper-parameter: a non-negative number (0: off), int64 or float.
struct ConfigKey {
  std::variant<std::int64_t ModelConfig::*, float ModelConfig::*> field;
  const char* gguf;  // GGUF key after "{arch}."
  const char* hf;    // config.json field
  ConfigKeyWritten written;
};

/// Every row (config_keys.cpp).
std::span<const ConfigKey> config_keys();

/// What a reader of `format` takes for a key of config_keys() its file lacks: ModelConfig's
/// defaults with the family's (apply_architecture); in GGUF files the family's soft-caps too
/// (Architecture::gguf_attn_softcap / gguf_final_softcap, llama.cpp's hparams defaults).
ModelConfig config_key_defaults(const Architecture& family, ConfigKeyFormat format);

/// Whether a writer of `format` writes key `k` of config `c` (ConfigKeyWritten against
/// config_key_defaults of c's family; an unknown family: its non-zero values).
bool config_key_written(const ConfigKey& k, const ModelConfig& c, ConfigKeyFormat format);

}  // namespace peregrine
