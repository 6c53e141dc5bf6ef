#include "peregrine/tokenizer/pair_merge.h"

#include <queue>

#include "peregrine/tokenizer/utf8.h"

namespace peregrine {
namespace {

struct Node {
  Span span;
  std::int32_t prev = -1;
  std::int32_t next = -1;
};

// A candidate merge of nodes left/right, valid while both still have the recorded sizes and
// are still neighbours.
struct Candidate {
  double priority = 0;
  std::int32_t left = 0;
  std::int32_t right = 0;
  std::uint32_t left_size = 0;
  std::uint32_t right_size = 0;
};

struct WorseCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left > b.left;  // ties: the leftmost pair wins
  }
};

using Queue = std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate>;

class Merger {
 public:
  Merger(std::string_view text, const std::vector<Span>& initial, const PairPriority& priority)
      : text_(text), priority_(priority) {
    nodes_.reserve(initial.size());
    for (std::size_t i = 0; i < initial.size(); ++i) {
      Node n;
      n.span = initial[i];
      n.prev = static_cast<std::int32_t>(i) - 1;
      n.next = i + 1 < initial.size() ? static_cast<std::int32_t>(i) + 1 : -1;
      nodes_.push_back(n);
    }
  }

  std::vector<Span> run() {
    for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(nodes_.size()); ++i) consider(i, i + 1);
    while (!queue_.empty()) {
      const Candidate c = queue_.top();
      queue_.pop();
      if (still_valid(c)) merge(c);
    }
    return result();
  }

 private:
  std::string_view view(const Node& n) const { return text_.substr(n.span.begin, n.span.size); }

  void consider(std::int32_t left, std::int32_t right) {
    if (left < 0 || right < 0) return;
    const Node& l = nodes_[static_cast<std::size_t>(left)];
    const Node& r = nodes_[static_cast<std::size_t>(right)];
    const auto p = priority_(view(l), view(r));
    if (p) queue_.push({*p, left, right, l.span.size, r.span.size});
  }

  bool still_valid(const Candidate& c) const {
    const Node& l = nodes_[static_cast<std::size_t>(c.left)];
    const Node& r = nodes_[static_cast<std::size_t>(c.right)];
    return l.next == c.right && l.span.size == c.left_size && r.span.size == c.right_size;
  }

  void merge(const Candidate& c) {
    Node& l = nodes_[static_cast<std::size_t>(c.left)];
    Node& r = nodes_[static_cast<std::size_t>(c.right)];
    l.span.size += r.span.size;
    r.span.size = 0;
    l.next = r.next;
    if (r.next >= 0) nodes_[static_cast<std::size_t>(r.next)].prev = c.left;
    r.prev = r.next = -1;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  std::vector<Span> result() const {
    std::vector<Span> out;
    for (std::int32_t i = nodes_.empty() ? -1 : 0; i >= 0; i = nodes_[static_cast<std::size_t>(i)].next) {
      out.push_back(nodes_[static_cast<std::size_t>(i)].span);
    }
    return out;
  }

  std::string_view text_;
  const PairPriority& priority_;
  std::vector<Node> nodes_;
  Queue queue_;
};

}  // namespace

std::vector<Span> merge_pairs(std::string_view text, const std::vector<Span>& initial,
                              const PairPriority& priority) {
  return Merger(text, initial, priority).run();
}

std::vector<Span> char_spans(std::string_view text) {
  std::vector<Span> spans;
  spans.reserve(text.size());
  std::uint32_t pos = 0;
  for (std::uint32_t len : utf8_char_lengths(text)) {
    spans.push_back({pos, len});
    pos += len;
  }
  return spans;
}

}  // namespace peregrine
