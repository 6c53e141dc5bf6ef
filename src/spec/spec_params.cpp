#include "peregrine/spec/spec_params.h"

#include <string>

namespace peregrine {

const char* spec_method_name(SpecMethod m) {
  switch (m) {
    case SpecMethod::kNone: return "none";
    case SpecMethod::kPld: return "pld";
    case SpecMethod::kDraft: return "draft";
    case SpecMethod::kLayerSkip: return "layerskip";
    case SpecMethod::kQuant: return "quant";
    case SpecMethod::kMedusa: return "medusa";
    case SpecMethod::kEagle: return "eagle";
  }
  return "?";
}

Expected<SpecMethod> parse_spec_method(std::string_view name) {
  for (SpecMethod m : {SpecMethod::kNone, SpecMethod::kPld, SpecMethod::kDraft, SpecMethod::kLayerSkip, SpecMethod::kQuant,
                       SpecMethod::kMedusa, SpecMethod::kEagle}) {
    if (name == spec_method_name(m)) return m;
  }
  return invalid_argument("unknown speculative method '" + std::string(name) +
                          "' (expected none, pld, draft, layerskip, quant, medusa or eagle)");
}

Status SpecParams::validate() const {
  if (draft_max < 1 || draft_max > kMaxDraftNodes) {
    return invalid_argument("draft_max must be in [1, " + std::to_string(kMaxDraftNodes) + "] (got " +
                            std::to_string(draft_max) + ")");
  }
  if (branching < 1 || branching > draft_max) {
    return invalid_argument("draft branching must be in [1, draft_max] (got " + std::to_string(branching) + ")");
  }
  return Status::ok();
}

}  // namespace peregrine
