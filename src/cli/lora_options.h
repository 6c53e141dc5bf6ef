// The --lora options of generate, serve and lora merge: adapter specs PATH[:SCALE] (serve:
// NAME=PATH[:SCALE]) and the LoraPool they load into (engine/lora_pool.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "peregrine/core/status.h"
#include "peregrine/formats/model_file.h"
#include "common.h"
#include "peregrine/engine/lora_pool.h"

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

/// Loads every adapter of `specs` for `base` (load_lora_adapter) as the entries of one slot,
/// applied together (generate's repeated --lora). In a --tp / --pp run (`run`), `base` is this
/// rank's part: each adapter is checked against the whole model file and cut for the rank
/// (lora_for_run). Errors: those of load_lora_adapter, load_model_file and lora_for_run.
Expected<std::vector<LoraSlotEntry>> load_lora_entries(const std::vector<LoraSpec>& specs, const ModelFile& base,
                                                       const ModelOptions& run);

/// generate's pool: one adapter (index 0) applying `entries`, resident, multiplied in
/// lora_product_dtype(base).
std::unique_ptr<LoraPool> resident_lora_pool(std::vector<LoraSlotEntry> entries, const ModelFile& base);

/// serve's pool: adapter k is specs[k], loaded on demand from its path into at most
/// `max_loras` slots (0: one per spec), evicted least recently used; in a --tp / --pp run
/// (`run`) each cut for this rank (load_lora_entries). Each is loaded once here,
/// so a bad adapter fails at startup; the last `max_loras` stay resident. `base` and `run` must
/// outlive the pool. Errors: kInvalidArgument (max_loras < 0); kInternal, naming the adapter and
/// load_lora_adapter's error, when one cannot be loaded (at startup, or later on demand).
Expected<std::unique_ptr<LoraPool>> serve_lora_pool(const std::vector<LoraSpec>& specs, const ModelFile& base,
                                                    std::int32_t max_loras, const ModelOptions& run);

}  // namespace peregrine::cli
