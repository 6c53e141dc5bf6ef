#include "peregrine/engine/speculation.h"

#include <algorithm>
#include <chrono>

#include "peregrine/spec/pld_drafter.h"
#include "peregrine/spec/verify.h"

namespace peregrine {
namespace {

constexpr double kCostDecay = 0.9;  // EMA weight of the past for the draft cost estimate

double ema(double old, double sample) { return old == 0 ? sample : kCostDecay * old + (1 - kCostDecay) * sample; }

// Tree depth (the chain length of its deepest branch): the draft length for the acceptance
// estimate.
std::int64_t max_depth(const DraftTree& tree) {
  std::int64_t d = 0;
  for (std::int64_t i = 0; i < tree.size(); ++i) d = std::max<std::int64_t>(d, tree.depth(i));
  return d;
}

}  // namespace

Speculation::Speculation(Drafter* model_drafter)
    : pld_(std::move(PldDrafter::create(PldOptions{}).value())),  // the default options are valid
      model_drafter_(model_drafter) {}

Speculation::~Speculation() = default;

Drafter* Speculation::drafter_for(SpecMethod m) const {
  if (m == SpecMethod::kPld) return pld_.get();
  if (model_drafter_ != nullptr && model_drafter_->method() == m) return model_drafter_;
  return nullptr;
}

Status Speculation::check(const SpecParams& p) const {
  PEREGRINE_RETURN_IF_ERROR(p.validate());
  if (p.method == SpecMethod::kNone || drafter_for(p.method) != nullptr) return Status::ok();
  const std::string have = model_drafter_ != nullptr ? std::string("pld and ") + spec_method_name(model_drafter_->method())
                                                     : std::string("pld");
  return invalid_argument(std::string("speculative method '") + spec_method_name(p.method) +
                          "' needs a drafter this server was not started with (available: " + have + ")");
}

void Speculation::plan(const std::vector<std::unique_ptr<Sequence>>& running, std::int64_t ctx_len) const {
  for (const auto& s : running) {
    Sequence& seq = *s;
    const SpecParams& p = seq.request.spec;
    seq.spec.budget = 0;
    if (p.method == SpecMethod::kNone || seq.n_pending() != 1) continue;
    const std::int64_t want = p.adaptive ? seq.spec.adaptive.next(draft_cost(p.method)) : p.draft_max;
    const std::int64_t left = seq.request.max_tokens - seq.n_generated() - 1;  // tokens a step may add past the root
    const std::int64_t room = ctx_len - static_cast<std::int64_t>(seq.tokens.size());
    seq.spec.budget = std::max<std::int64_t>(0, std::min({want, left, room}));
  }
}

bool Speculation::needs_features(const std::vector<ScheduledChunk>& chunks) const {
  return std::any_of(chunks.begin(), chunks.end(), [&](const ScheduledChunk& c) {
    const Drafter* d = drafter_for(c.seq->request.spec.method);
    return d != nullptr && d->needs_features();
  });
}

void Speculation::keep_features(Sequence& seq, std::int64_t first_position, std::span<const float> rows,
                                std::int64_t dim) const {
  const Drafter* d = drafter_for(seq.request.spec.method);
  if (d != nullptr && d->needs_features()) seq.spec.features.put(first_position, rows, dim);
}

void Speculation::draft(const std::vector<ScheduledChunk>& chunks, ThreadPool& pool) {
  std::map<Drafter*, std::vector<const ScheduledChunk*>> groups;
  for (const ScheduledChunk& c : chunks) {
    c.seq->spec.tree.nodes.clear();
    if (c.n_draft > 0) groups[drafter_for(c.seq->request.spec.method)].push_back(&c);
  }
  for (const auto& [drafter, group] : groups) {
    std::vector<DraftRequest> requests;
    for (const ScheduledChunk* c : group) {
      const Sequence& seq = *c->seq;
      requests.push_back({seq.kv_seq, seq.tokens, static_cast<std::int32_t>(c->n_draft), seq.request.spec.branching,
                          &seq.request.sampling, &c->seq->spec.rng, seq.spec.features.values, seq.spec.features.begin});
    }
    std::vector<DraftTree> trees;
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = drafter->draft(requests, trees, pool);
    for (const ScheduledChunk* c : group) c->seq->spec.features.clear();
    if (!st.is_ok()) continue;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::int64_t nodes = 0;
    for (std::size_t i = 0; i < group.size(); ++i) {
      nodes += trees[i].size();
      group[i]->seq->spec.tree = std::move(trees[i]);
    }
    if (nodes > 0) {
      double& per_node = draft_seconds_per_node_[drafter->method()];
      per_node = ema(per_node, seconds / static_cast<double>(nodes));
    }
  }
}

void Speculation::add_rows(const Sequence& seq, Batch& batch) {
  const auto root = static_cast<std::int32_t>(batch.size());
  const auto p0 = static_cast<std::int32_t>(seq.n_computed);
  const DraftTree& tree = seq.spec.tree;
  batch.add(seq.tokens.back(), p0, seq.kv_seq, true);
  const bool chain = tree.is_chain();
  for (std::int64_t i = 0; i < tree.size(); ++i) {
    const DraftNode& n = tree.nodes[static_cast<std::size_t>(i)];
    const std::int32_t parent_row = root + 1 + n.parent;  // n.parent == -1: the root row
    batch.add(n.token, batch.positions[static_cast<std::size_t>(parent_row)] + 1, seq.kv_seq, true,
              chain ? -1 : parent_row);
  }
}

Expected<std::vector<SpecToken>> Speculation::verify(Sequence& seq, std::span<const float> logits, std::int64_t vocab,
                                                     Scheduler& scheduler, std::span<const float> features) {
  const DraftTree& tree = seq.spec.tree;
  std::span<const std::int32_t> history(seq.tokens);
  auto verified = verify_draft(tree, logits, vocab, history, seq.sampler);
  if (!verified) return verified.status();
  const VerifyResult& v = *verified;
  // The root's KV is at n_computed - 1 (committed); node i's at n_computed + i.
  std::vector<std::int64_t> from;
  for (std::int32_t node : v.path) from.push_back(seq.n_computed + node);
  scheduler.keep_accepted(seq, from);
  if (!features.empty()) {
    // Rows of the root (position n_computed - 1) and of the accepted path, in order.
    const auto dim = static_cast<std::int64_t>(features.size()) / (1 + tree.size());
    std::vector<float> kept(features.begin(), features.begin() + dim);
    for (std::int32_t node : v.path) {
      const auto row = features.subspan(static_cast<std::size_t>((1 + node) * dim), static_cast<std::size_t>(dim));
      kept.insert(kept.end(), row.begin(), row.end());
    }
    keep_features(seq, seq.n_computed - 1, kept, dim);
  }
  seq.n_computed += static_cast<std::int64_t>(v.path.size());
  std::vector<SpecToken> out;
  std::int64_t row = 0;
  for (std::int32_t node : v.path) {
    out.push_back({tree.nodes[static_cast<std::size_t>(node)].token, row});
    row = 1 + node;
  }
  out.push_back({v.next_token, row});
  RequestResult& r = seq.result;
  r.spec_drafted += tree.size();
  r.spec_accepted += static_cast<std::int64_t>(v.path.size());
  ++r.spec_steps;
  seq.spec.adaptive.update(max_depth(tree), static_cast<std::int64_t>(v.path.size()));
  return out;
}

void Speculation::observe_forward(std::int64_t rows, double seconds) { forward_cost_.observe(rows, seconds); }

// Leviathan et al.'s c, extended with the verification's own cost per drafted row: a step
// drafting k tokens costs t(1) + k · (draft per token + b) where t(rows) = a + b · rows.
double Speculation::draft_cost(SpecMethod m) const {
  const double step = forward_cost_.seconds(1);
  if (step <= 0) return 0.0;
  const auto it = draft_seconds_per_node_.find(m);
  const double draft = it == draft_seconds_per_node_.end() ? 0.0 : it->second;
  return (draft + forward_cost_.seconds_per_row()) / step;
}

void Speculation::release(const Sequence& seq) {
  if (Drafter* d = drafter_for(seq.request.spec.method)) d->release(seq.kv_seq);
}

}  // namespace peregrine
