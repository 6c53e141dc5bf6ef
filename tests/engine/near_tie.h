// Greedy texts of one model computed through forwards of other shapes are equal only up to a
// near tie. Forwards of other shapes run other kernels (decode attention against the tiled
// prefill one, a GEMV against the row panels), whose f32 sums differ in their last bits, and the
// int8 activation quantization of the next layers carries that into the logits. Speculative
// decoding (verification rows against one-row decode steps) parted from plain decoding where
// the logits stood 0.018 apart (smollm2 at AVX2: '2' 36.298 against '3' 36.280), within
// kNearTie. Shapes can move logits further: gemma3-270m, a whole prompt against its cached
// prefix's 8-token suffix (the GEMV, not the row panels), parted at 26.079 against 25.993 in the
// native build and at 26.310 against 26.050 in the ASan one — such a test keeps its shapes to
// one kernel instead (tests/engine/sliding_window_engine_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "peregrine/model/llama_model.h"
#include "peregrine/sampling/grammar_matcher.h"

namespace peregrine::test {

/// How far below the maximum logit a token may stand and still be a near tie.
constexpr float kNearTie = 0.1f;

/// Expects `a` == `b`, or else that where they first differ both tokens stand within kNearTie
/// of the maximum logit (the grammar-allowed maximum with `grammar`) of one forward of `model`
/// over `prompt` and the common prefix; a text that ended there stands for `eos`.
void expect_equal_up_to_a_near_tie(const LlamaModel& model, const std::vector<std::int32_t>& prompt,
                                   const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
                                   std::int32_t eos, const TokenGrammar* grammar = nullptr);

}  // namespace peregrine::test
