// The --lora options of generate, serve and lora merge: adapter specs PATH[:SCALE] (serve:
// NAME=PATH[:SCALE]) and the LoraSet they load into (model/lora_set.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"
#include "peregrine/model/lora_set.h"

namespace peregrine::cli {

struct LoraSpec {
  std::string name;  // serve's NAME (empty elsewhere)
  std::string path;
  float scale = 1.0f;
};

/// "PATH[:SCALE]": a path that exists as given keeps its colons; otherwise the text after the
/// last ':' must be a finite number. With `named`, "NAME=PATH[:SCALE]". Errors:
/// kInvalidArgument (a scale that is not a number, no path, no name).
Expected<LoraSpec> parse_lora_spec(const std::string& spec, bool named = false);

/// Loads every adapter of `specs` for `base` (load_lora_adapter) and adds them to `set`: all
/// in one slot (generate's repeated --lora), or with `slot_per_spec` one slot each, in order
/// (serve). Errors: those of parse_lora_spec, load_lora_adapter and LoraSet::add_slot.
Status load_loras(const std::vector<LoraSpec>& specs, const ModelFile& base, bool slot_per_spec, LoraSet& set);

}  // namespace peregrine::cli
