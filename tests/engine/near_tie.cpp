#include "near_tie.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "test_models.h"

namespace peregrine::test {

void expect_equal_up_to_a_near_tie(const LlamaModel& model, const std::vector<std::int32_t>& prompt,
                                   const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b,
                                   std::int32_t eos, const TokenGrammar* grammar) {
  if (a == b) return;
  std::size_t d = 0;
  while (d < a.size() && d < b.size() && a[d] == b[d]) ++d;
  const auto at = [&](const std::vector<std::int32_t>& v) { return d < v.size() ? v[d] : eos; };
  ASSERT_GE(std::min(at(a), at(b)), 0) << "one text ended at token " << d << " without an EOS to stand for it";
  std::vector<std::int32_t> tokens = prompt;
  tokens.insert(tokens.end(), a.begin(), a.begin() + static_cast<std::ptrdiff_t>(d));
  ThreadPool pool(2);
  KvCache cache = make_kv_cache(model.config(), static_cast<std::int64_t>(tokens.size()));
  Batch batch;
  for (std::size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], static_cast<std::int32_t>(i), 0, i + 1 == tokens.size());
  std::vector<float> logits;
  ASSERT_TRUE(model.forward(batch, cache, logits, pool).is_ok());
  if (grammar != nullptr) {
    GrammarMatcher matcher(*grammar, eos);
    for (std::size_t i = 0; i < d; ++i) ASSERT_TRUE(matcher.accept(a[i]).is_ok());
    ASSERT_GT(matcher.mask(logits), 0);
  }
  const float top = *std::max_element(logits.begin(), logits.end());
  const float la = logits[static_cast<std::size_t>(at(a))], lb = logits[static_cast<std::size_t>(at(b))];
  EXPECT_GT(la, top - kNearTie) << "token " << d;
  EXPECT_GT(lb, top - kNearTie) << "token " << d;
  std::cout << "  first difference at token " << d << ": logits " << la << " and " << lb << ", the maximum " << top << "\n";
}

}  // namespace peregrine::test
