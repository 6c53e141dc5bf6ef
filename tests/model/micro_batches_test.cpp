// split_micro_batches (model/micro_batches.h): parts cut between whole sequences, balanced by
// rows, concatenating back to the batch; batches it must not cut come back whole. The logits of
// micro-batched pipeline forwards on every family: parallel_test.
#include "peregrine/model/micro_batches.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

// Rows of `seqs` in order: seq s gets `lengths[s]` rows at positions 0.., logits on its last.
Batch ragged(const std::vector<std::int32_t>& seqs, const std::vector<std::int32_t>& lengths) {
  Batch b;
  for (std::size_t s = 0; s < seqs.size(); ++s) {
    for (std::int32_t p = 0; p < lengths[s]; ++p) b.add(100 * seqs[s] + p, p, seqs[s], p + 1 == lengths[s]);
  }
  return b;
}

Batch concat(const std::vector<Batch>& parts) {
  Batch b;
  for (const Batch& part : parts) {
    for (std::int64_t i = 0; i < part.size(); ++i) {
      const auto r = static_cast<std::size_t>(i);
      b.add(part.tokens[r], part.positions[r], part.seq_ids[r], part.need_logits[r] != 0);
      if (!part.lora_slots.empty()) b.lora_slots.push_back(part.lora_slots[r]);
    }
  }
  return b;
}

void expect_same(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.seq_ids, b.seq_ids);
  EXPECT_EQ(a.need_logits, b.need_logits);
  EXPECT_EQ(a.lora_slots, b.lora_slots);
}

std::vector<std::int64_t> sizes(const std::vector<Batch>& parts) {
  std::vector<std::int64_t> out;
  for (const Batch& p : parts) out.push_back(p.size());
  return out;
}

TEST(MicroBatches, CutsBetweenWholeSequencesBalancedByRows) {
  const Batch decodes = ragged({0, 1, 2, 3, 4, 5, 6, 7}, {1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(sizes(split_micro_batches(decodes, 2)), (std::vector<std::int64_t>{4, 4}));
  EXPECT_EQ(sizes(split_micro_batches(decodes, 4)), (std::vector<std::int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(sizes(split_micro_batches(decodes, 20)).size(), 8u);  // at most one part per sequence
  Batch mixed = ragged({3, 1, 2}, {1, 64, 1});  // a decode, a 64-row prefill chunk, a decode
  mixed.lora_slots = std::vector<std::int32_t>(66, -1);
  mixed.lora_slots[0] = 2;
  for (std::int64_t n : {1, 2, 3, 5}) {
    const std::vector<Batch> parts = split_micro_batches(mixed, n);
    EXPECT_LE(static_cast<std::int64_t>(parts.size()), n);
    expect_same(concat(parts), mixed);
    for (const Batch& p : parts) EXPECT_GT(p.size(), 0);
  }
  EXPECT_EQ(sizes(split_micro_batches(mixed, 2)), (std::vector<std::int64_t>{65, 1}));
}

TEST(MicroBatches, BatchesThatCannotBeCutComeBackWhole) {
  Batch interleaved;  // sequence 0's rows around sequence 1's
  interleaved.add(1, 0, 0, false);
  interleaved.add(2, 0, 1, true);
  interleaved.add(3, 1, 0, true);
  ASSERT_EQ(split_micro_batches(interleaved, 2).size(), 1u);
  expect_same(split_micro_batches(interleaved, 2)[0], interleaved);
  Batch tree = ragged({0, 1}, {2, 2});
  tree.parents = {-1, 0, -1, 2};  // token-tree rows stay in one forward
  EXPECT_EQ(split_micro_batches(tree, 2).size(), 1u);
  EXPECT_EQ(split_micro_batches(ragged({0}, {9}), 4).size(), 1u);  // one sequence
}

}  // namespace
}  // namespace peregrine
