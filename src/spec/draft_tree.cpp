#include "peregrine/spec/draft_tree.h"

namespace peregrine {

std::int32_t DraftTree::depth(std::int64_t node) const {
  std::int32_t d = 0;
  for (std::int64_t i = node; i >= 0; i = nodes[static_cast<std::size_t>(i)].parent) ++d;
  return d;
}

bool DraftTree::is_chain() const {
  std::vector<std::uint8_t> has_child(nodes.size() + 1, 0);  // slot 0: the root
  for (const DraftNode& n : nodes) {
    std::uint8_t& c = has_child[static_cast<std::size_t>(n.parent + 1)];
    if (c) return false;
    c = 1;
  }
  return true;
}

}  // namespace peregrine
