// train/finetune.h's option checks and --target names (torch-free: the CLI checks them before
// loading the training library).
#include <cmath>
#include <set>
#include <string>

#include "peregrine/train/finetune.h"

namespace peregrine::train {
namespace {

constexpr std::string_view kTargetTensors[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};

std::string valid_targets() {
  std::string s;
  for (std::string_view t : kLoraTargetNames) (s += s.empty() ? "" : ",") += t;
  return s;
}

// Every name known, none twice, at least one.
Status check_targets(const std::vector<std::string>& targets) {
  if (targets.empty()) return invalid_argument("--target names no projection");
  std::set<std::string> seen;
  for (const std::string& t : targets) {
    if (auto tensor = lora_target_tensor(t); !tensor) return tensor.status();
    if (!seen.insert(t).second) return invalid_argument("--target names '" + t + "' twice");
  }
  return Status::ok();
}

}  // namespace

Expected<std::string> lora_target_tensor(std::string_view target) {
  for (std::size_t i = 0; i < std::size(kLoraTargetNames); ++i) {
    if (kLoraTargetNames[i] == target) return std::string(kTargetTensors[i]);
  }
  return invalid_argument("--target '" + std::string(target) + "' is not one of " + valid_targets());
}

Expected<std::vector<std::string>> parse_lora_targets(std::string_view spec) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string name(spec.substr(pos, end - pos));
    if (name.empty()) return invalid_argument("--target '" + std::string(spec) + "' has an empty entry (a list of " + valid_targets() + ")");
    out.push_back(name);
    if (end == spec.size()) break;
    pos = end + 1;
  }
  PEREGRINE_RETURN_IF_ERROR(check_targets(out));
  return out;
}

Status FinetuneOptions::validate() const {
  if (rank < 1) return invalid_argument("--lora-r must be >= 1 (got " + std::to_string(rank) + ")");
  if (!(alpha > 0.0f) || !std::isfinite(alpha)) return invalid_argument("--lora-alpha must be > 0");
  PEREGRINE_RETURN_IF_ERROR(check_targets(targets));
  if (steps < 1 || batch < 1) return invalid_argument("--steps and --batch must be >= 1");
  if (seq < 2) return invalid_argument("--seq-len must be >= 2");
  if (!(lr > 0.0f) || !std::isfinite(lr)) return invalid_argument("--lr must be > 0");
  if (warmup < 0) return invalid_argument("--warmup must be >= 0");
  return Status::ok();
}

}  // namespace peregrine::train
