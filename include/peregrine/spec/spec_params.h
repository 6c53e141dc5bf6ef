// Per-request speculative-decoding settings: which drafter proposes tokens, how many per step,
// chain or token tree, fixed or adaptive length (seed 000/001: SpS, Medusa/EAGLE trees, PLD).
#pragma once

#include <cstdint>
#include <string_view>

#include "peregrine/core/status.h"

namespace peregrine {

/// Where drafts come from. kNone: plain decoding.
enum class SpecMethod {
  kNone,
  kPld,        // n-gram prompt lookup over the prompt and output so far (Saxena 2023)
  kDraft,      // a separate, smaller draft model sharing the target's vocabulary (Leviathan et al. 2023)
  kLayerSkip,  // the target's first k layers + final norm + LM head (self-speculative)
  kQuant,      // a quantized copy of the target (e.g. Q4_0) drafts for the full-precision target
  kMedusa,     // Medusa-1 heads on the target's final hidden state (Cai et al. 2024)
  kEagle,      // an EAGLE-1 head autoregressing on the target's features (Li et al. 2024)
};

/// "none" | "pld" | "draft" | "layerskip" | "quant" | "medusa" | "eagle".
const char* spec_method_name(SpecMethod m);
/// The inverse of spec_method_name. Errors: kInvalidArgument naming the accepted values.
Expected<SpecMethod> parse_spec_method(std::string_view name);

/// Largest draft budget a request may ask for (rows a verification adds to the batch).
inline constexpr std::int32_t kMaxDraftNodes = 64;

struct SpecParams {
  SpecMethod method = SpecMethod::kNone;
  std::int32_t draft_max = 4;  // draft tokens (tree nodes) per step at most, 1..kMaxDraftNodes
  std::int32_t branching = 1;  // children per expanded node: 1 = a chain, > 1 = a token tree
  bool adaptive = false;       // adapt the per-step budget from the running acceptance rate

  /// Errors: kInvalidArgument (draft_max outside [1, kMaxDraftNodes], branching outside
  /// [1, draft_max]).
  Status validate() const;
};

}  // namespace peregrine
