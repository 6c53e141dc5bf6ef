// SpecParams validation, method names, and DraftTree depth / chain detection.
#include <gtest/gtest.h>

#include "peregrine/spec/draft_tree.h"
#include "peregrine/spec/spec_params.h"

namespace peregrine {
namespace {

TEST(SpecParams, MethodNamesRoundTrip) {
  for (const char* name : {"none", "pld", "draft", "layerskip", "quant", "medusa", "eagle"}) {
    auto m = parse_spec_method(name);
    ASSERT_TRUE(m) << name;
    EXPECT_STREQ(spec_method_name(*m), name);
  }
  auto bad = parse_spec_method("eagle3");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("pld"), std::string::npos);
}

TEST(SpecParams, ValidateRanges) {
  SpecParams p;
  EXPECT_TRUE(p.validate().is_ok());
  p.draft_max = 0;
  EXPECT_EQ(p.validate().code(), ErrorCode::kInvalidArgument);
  p.draft_max = kMaxDraftNodes + 1;
  EXPECT_EQ(p.validate().code(), ErrorCode::kInvalidArgument);
  p.draft_max = 8;
  p.branching = 9;
  EXPECT_EQ(p.validate().code(), ErrorCode::kInvalidArgument);
  p.branching = 3;
  EXPECT_TRUE(p.validate().is_ok());
}

DraftTree tree_of(std::initializer_list<std::pair<std::int32_t, std::int32_t>> token_parent) {
  DraftTree t;
  for (auto [token, parent] : token_parent) t.nodes.push_back(DraftNode{token, parent, 0.0f, {}});
  return t;
}

TEST(DraftTree, DepthAndChain) {
  const DraftTree chain = tree_of({{5, -1}, {6, 0}, {7, 1}});
  EXPECT_TRUE(chain.is_chain());
  EXPECT_EQ(chain.depth(0), 1);
  EXPECT_EQ(chain.depth(2), 3);
  const DraftTree tree = tree_of({{5, -1}, {9, -1}, {6, 0}, {7, 0}, {8, 3}});
  EXPECT_FALSE(tree.is_chain());
  EXPECT_EQ(tree.depth(1), 1);
  EXPECT_EQ(tree.depth(4), 3);
  EXPECT_TRUE(DraftTree{}.is_chain());
}

}  // namespace
}  // namespace peregrine
