#include "peregrine/model/activation_observer.h"

namespace peregrine {
namespace {

constexpr const char* kAttention[] = {"attn_q", "attn_k", "attn_v"};
constexpr const char* kAttentionOutput[] = {"attn_output"};
constexpr const char* kFfn[] = {"ffn_gate", "ffn_up"};
constexpr const char* kFfnDown[] = {"ffn_down"};

}  // namespace

std::span<const char* const> linear_names(LinearInput input) {
  switch (input) {
    case LinearInput::kAttention: return kAttention;
    case LinearInput::kAttentionOutput: return kAttentionOutput;
    case LinearInput::kFfn: return kFfn;
    case LinearInput::kFfnDown: return kFfnDown;
  }
  return {};
}

}  // namespace peregrine
