#include "lora_options.h"

#include "parallel_options.h"

#include <charconv>
#include <cmath>
#include <filesystem>

namespace peregrine::cli {

Expected<LoraSpec> parse_lora_spec(const std::string& text, bool named) {
  LoraSpec out;
  std::string spec = text;
  if (named) {
    const std::size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return invalid_argument("--lora '" + text + "' names no adapter (NAME=PATH[:SCALE])");
    out.name = spec.substr(0, eq);
    spec = spec.substr(eq + 1);
  }
  std::error_code ec;
  const std::size_t colon = spec.rfind(':');
  if (colon == std::string::npos || std::filesystem::exists(spec, ec)) {
    out.path = spec;
  } else {
    const std::string scale = spec.substr(colon + 1);
    out.path = spec.substr(0, colon);
    const auto [end, err] = std::from_chars(scale.data(), scale.data() + scale.size(), out.scale);
    if (scale.empty() || err != std::errc() || end != scale.data() + scale.size() || !std::isfinite(out.scale)) {
      return invalid_argument("--lora '" + text + "': scale '" + scale + "' is not a number (PATH[:SCALE])");
    }
  }
  if (out.path.empty()) return invalid_argument("--lora '" + text + "' names no adapter (PATH[:SCALE])");
  return out;
}

Expected<std::vector<LoraSlotEntry>> load_lora_entries(const std::vector<LoraSpec>& specs, const ModelFile& base,
                                                       const ModelOptions& run) {
  std::vector<LoraSlotEntry> entries;
  const bool split = run.tp * run.pp > 1;
  ModelFile whole;
  if (split) {
    PEREGRINE_ASSIGN_OR_RETURN(whole, load_model_file(run.model.empty() ? default_model_path() : run.model));
  }
  for (const LoraSpec& s : specs) {
    PEREGRINE_ASSIGN_OR_RETURN(LoraAdapter adapter, load_lora_adapter(s.path, split ? whole : base));
    if (split) {
      PEREGRINE_ASSIGN_OR_RETURN(adapter, lora_for_run(std::move(adapter), whole.config, run));
    }
    entries.push_back({std::make_shared<const LoraAdapter>(std::move(adapter)), s.scale});
  }
  return entries;
}

std::unique_ptr<LoraPool> resident_lora_pool(std::vector<LoraSlotEntry> entries, const ModelFile& base) {
  std::vector<LoraLoader> loaders{[entries = std::move(entries)]() -> Expected<std::vector<LoraSlotEntry>> { return entries; }};
  return std::make_unique<LoraPool>(std::move(loaders), 1, lora_product_dtype(base));
}

Expected<std::unique_ptr<LoraPool>> serve_lora_pool(const std::vector<LoraSpec>& specs, const ModelFile& base,
                                                    std::int32_t max_loras, const ModelOptions& run) {
  if (max_loras < 0) return invalid_argument("--max-loras must be >= 0 (got " + std::to_string(max_loras) + ")");
  std::vector<LoraLoader> loaders;
  for (const LoraSpec& s : specs) {
    // Read again after an eviction: a file gone or changed since startup is the server's
    // fault, not the request's (HTTP 500).
    loaders.push_back([s, &base, &run]() -> Expected<std::vector<LoraSlotEntry>> {
      auto entries = load_lora_entries({s}, base, run);
      if (!entries) return Status(ErrorCode::kInternal, "LoRA adapter '" + s.name + "' could not be loaded: " + entries.status().message());
      return entries;
    });
  }
  const auto n = static_cast<std::int32_t>(specs.size());
  auto pool = std::make_unique<LoraPool>(std::move(loaders), max_loras > 0 ? max_loras : n, lora_product_dtype(base));
  for (std::int32_t k = 0; k < n; ++k) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::optional<std::int32_t> slot, pool->acquire(k));
    pool->release(*slot);  // nothing else pins a slot yet: one is always free
  }
  return pool;
}

}  // namespace peregrine::cli
