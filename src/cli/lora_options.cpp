#include "lora_options.h"

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

Status load_loras(const std::vector<LoraSpec>& specs, const ModelFile& base, bool slot_per_spec, LoraSet& set) {
  std::vector<LoraSlotEntry> slot;
  for (const LoraSpec& s : specs) {
    PEREGRINE_ASSIGN_OR_RETURN(LoraAdapter adapter, load_lora_adapter(s.path, base));
    slot.push_back({std::make_shared<const LoraAdapter>(std::move(adapter)), s.scale});
    if (slot_per_spec) {
      PEREGRINE_ASSIGN_OR_RETURN(const std::int32_t added, set.add_slot(std::move(slot)));
      (void)added;
      slot.clear();
    }
  }
  if (!slot.empty()) {
    PEREGRINE_ASSIGN_OR_RETURN(const std::int32_t added, set.add_slot(std::move(slot)));
    (void)added;
  }
  return Status::ok();
}

}  // namespace peregrine::cli
