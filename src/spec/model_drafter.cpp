#include "peregrine/spec/model_drafter.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "draft_requests.h"
#include "draft_tree_builder.h"
#include "peregrine/model/batch_kv_plan.h"

namespace peregrine {

/// A node fed to the draft model: its row writes into cache sequence `id`, which is its
/// parent's sequence `parent_id` taken over, or a fork of it.
struct ModelDrafter::Row {
  std::int32_t node;  // -1: the root
  std::int32_t id, parent_id;
  std::int64_t row = 0;         // its batch row in the forward that feeds it
  std::int64_t parent_row = 0;  // its parent's batch row in the forward before (EAGLE: the feature it reads)
};

/// One request's work in a draft() call.
struct ModelDrafter::Job {
  std::size_t index;  // into requests / trees
  const DraftRequest* request;
  Sequence* seq;
  std::vector<std::int32_t> tokens;  // the request's tokens as the draft model sees them
  DraftTreeBuilder builder;
  std::vector<Row> rows;  // fed in the current forward, in batch order
};

Expected<std::unique_ptr<ModelDrafter>> ModelDrafter::create(const LlamaModel& draft, const ModelConfig& target,
                                                             const ModelDrafterOptions& options) {
  const ModelConfig& dc = draft.config();
  if (dc.vocab_size != target.vocab_size) {
    return invalid_argument("the draft model's vocabulary has " + std::to_string(dc.vocab_size) + " tokens, the target's " +
                            std::to_string(target.vocab_size) + ": a draft model must share the target's tokenizer");
  }
  if (options.method != SpecMethod::kDraft && options.method != SpecMethod::kLayerSkip && options.method != SpecMethod::kQuant) {
    return invalid_argument(std::string("a model drafter's method must be draft, layerskip or quant (got ") +
                            spec_method_name(options.method) + ")");
  }
  if (options.n_layers < 0 || options.n_layers > dc.n_layers) {
    return invalid_argument("draft layers must be in [0, " + std::to_string(dc.n_layers) + "] (0 = all; got " +
                            std::to_string(options.n_layers) + ")");
  }
  if (!(options.min_confidence >= 0.0f && options.min_confidence < 1.0f)) {
    return invalid_argument("draft min_confidence must be in [0, 1) (got " + std::to_string(options.min_confidence) + ")");
  }
  if (options.context_window < 0) {
    return invalid_argument("the draft context window must be >= 0 (got " + std::to_string(options.context_window) + ")");
  }
  ModelConfig cache_config = dc;
  if (options.n_layers > 0) cache_config.n_layers = options.n_layers;
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache,
                             KvCache::create(cache_config.kv_shape(), {options.kv_blocks, options.block_size, options.kv_dtype}));
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(&draft, nullptr, options, std::move(cache)));
}

Expected<std::unique_ptr<ModelDrafter>> ModelDrafter::create_eagle(const EagleLayer& eagle, const ModelConfig& target,
                                                                   const ModelDrafterOptions& options) {
  const ModelConfig& ec = eagle.config();
  if (ec.vocab_size != target.vocab_size || ec.dim != target.dim) {
    return invalid_argument("the EAGLE head does not match the target's vocabulary and hidden size");
  }
  if (options.method != SpecMethod::kEagle || options.n_layers != 0) {
    return invalid_argument("an EAGLE drafter's method must be eagle, with all (0) draft layers");
  }
  if (options.context_window != 0) {
    return invalid_argument("an EAGLE drafter reads the target's features by position: it takes no draft context window");
  }
  if (!(options.min_confidence >= 0.0f && options.min_confidence < 1.0f)) {
    return invalid_argument("draft min_confidence must be in [0, 1) (got " + std::to_string(options.min_confidence) + ")");
  }
  PEREGRINE_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(ec.kv_shape(), {options.kv_blocks, options.block_size, options.kv_dtype}));
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(nullptr, &eagle, options, std::move(cache)));
}

std::int32_t ModelDrafter::new_cache_id() {
  if (free_cache_ids_.empty()) return next_cache_id_++;
  const std::int32_t id = free_cache_ids_.back();
  free_cache_ids_.pop_back();
  return id;
}

ModelDrafter::Sequence& ModelDrafter::sequence(std::int32_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    Sequence s;
    s.cache_id = new_cache_id();
    it = seqs_.emplace(seq, std::move(s)).first;
  }
  return it->second;
}

void ModelDrafter::free_cache_id(std::int32_t id) {
  cache_.free_sequence(id);
  free_cache_ids_.push_back(id);
}

std::vector<std::int32_t> ModelDrafter::draft_view(Sequence& seq, std::span<const std::int32_t> tokens) const {
  const auto length = static_cast<std::int64_t>(tokens.size()), window = options_.context_window;
  if (seq.window_start < 0) seq.window_start = window > 0 && length - 1 > kDraftSinkTokens + window ? length - 1 - window : 0;
  if (seq.window_start == 0 || seq.window_start >= length) return {tokens.begin(), tokens.end()};
  std::vector<std::int32_t> view(tokens.begin(), tokens.begin() + kDraftSinkTokens);
  view.insert(view.end(), tokens.begin() + seq.window_start, tokens.end());
  return view;
}

// Resync: each sequence keeps the common prefix of its cached tokens and tokens[0, L - 1) (of
// its draft view), then feeds the rest and the root (logits on the root's row). Requests whose
// positions pass the draft model's context, or whose rows find no free blocks, sit this call out.
std::vector<ModelDrafter::Job> ModelDrafter::start_jobs(std::span<const DraftRequest> requests, Batch& batch) {
  std::vector<Job> jobs;
  row_features_.clear();
  std::int64_t free = cache_.pool().n_free();
  const std::int64_t max_seq_len = draft_config().max_seq_len;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    Sequence& s = sequence(r.seq);
    std::vector<std::int32_t> tokens = draft_view(s, r.tokens);
    const auto length = static_cast<std::int64_t>(tokens.size());
    const auto common = std::mismatch(s.cached.begin(), s.cached.end(), tokens.begin(), tokens.end()).first - s.cached.begin();
    const std::int64_t keep = std::min<std::int64_t>(common, length - 1);
    cache_.truncate(s.cache_id, keep);
    s.cached.resize(static_cast<std::size_t>(keep));
    if (length > max_seq_len) continue;
    const std::int64_t needed = cache_.blocks_needed(s.cache_id, length);
    if (needed > free) continue;
    free -= needed;
    const auto depth_limit = static_cast<std::int32_t>(std::min<std::int64_t>(r.max_nodes, max_seq_len - length + 1));
    for (std::int64_t p = keep; p < length; ++p) {
      batch.add(tokens[static_cast<std::size_t>(p)], static_cast<std::int32_t>(p), s.cache_id, p == length - 1);
      if (eagle_ != nullptr) add_context_feature(s, p);
    }
    const Row root{-1, s.cache_id, s.cache_id, batch.size() - 1, 0};
    jobs.push_back(Job{i, &r, &s, std::move(tokens), DraftTreeBuilder(r, depth_limit, options_.min_confidence), {root}});
  }
  return jobs;
}

void ModelDrafter::add_context_feature(const Sequence& seq, std::int64_t position) {
  const std::int64_t dim = draft_config().dim;
  const std::span<const float> f = seq.features.row(position, dim);
  if (f.empty()) {
    row_features_.insert(row_features_.end(), static_cast<std::size_t>(dim), 0.0f);
  } else {
    row_features_.insert(row_features_.end(), f.begin(), f.end());
  }
}

void ModelDrafter::grow(std::vector<Job>& jobs, std::span<const float> logits) {
  const auto vocab = static_cast<std::size_t>(draft_config().vocab_size);
  std::size_t row = 0;
  for (Job& job : jobs) {
    for (const Row& r : job.rows) {
      if (r.node < 0) {
        job.seq->cached = job.tokens;
        job.seq->features.drop_before(static_cast<std::int64_t>(job.seq->cached.size()), draft_config().dim);
      }
      job.builder.expand(r.node, logits.subspan(row++ * vocab, vocab));
    }
  }
}

// One row per expanded node (best first). Each takes over its parent's sequence (the first
// child to ask) or a fork of it. Rows are admitted in request order while the blocks their
// writes need (blocks_needed: a new block, or a copy of a shared last block) fit in the pool,
// dropping a job's worst rows first; parents' sequences no row took are freed (never a
// context's).
Batch ModelDrafter::next_batch(std::vector<Job>& jobs) {
  Batch batch;
  row_features_.clear();
  const auto dim = static_cast<std::size_t>(draft_config().dim);
  std::int64_t free = cache_.pool().n_free();
  const auto needed = [&](const std::vector<Row>& rows) {
    std::int64_t n = 0;
    for (const Row& r : rows) n += cache_.blocks_needed(r.id, cache_.length(r.id) + 1);
    return n;
  };
  for (Job& job : jobs) {
    std::vector<Row> rows;
    for (std::int32_t n : job.builder.frontier()) {
      // n is a child of a node fed in the last forward (frontier() returns only those).
      const std::int32_t parent = job.builder.parent(n);
      const Row& from = *std::find_if(job.rows.begin(), job.rows.end(), [&](const Row& r) { return r.node == parent; });
      const std::int32_t parent_id = from.id;
      const bool taken = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.id == parent_id; });
      const std::int32_t id = taken ? new_cache_id() : parent_id;
      if (taken) cache_.fork(parent_id, id);
      rows.push_back(Row{n, id, parent_id, 0, from.row});
    }
    for (std::int64_t need = needed(rows); need > free; need = needed(rows)) {
      if (rows.back().id != rows.back().parent_id) free_cache_id(rows.back().id);
      rows.pop_back();
    }
    free -= needed(rows);
    for (const Row& old : job.rows) {
      const bool kept = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.id == old.id; });
      if (!kept && old.id != job.seq->cache_id) free_cache_id(old.id);
    }
    job.rows = std::move(rows);
    const auto root_pos = static_cast<std::int32_t>(job.tokens.size()) - 1;
    for (Row& r : job.rows) {
      r.row = batch.size();
      batch.add(job.builder.token(r.node), root_pos + job.builder.depth(r.node), r.id, true);
      if (eagle_ != nullptr) {  // the feature its parent's row predicted
        const auto f = std::span(out_features_).subspan(static_cast<std::size_t>(r.parent_row) * dim, dim);
        row_features_.insert(row_features_.end(), f.begin(), f.end());
      }
    }
  }
  return batch;
}

Status ModelDrafter::run_forward(Batch& batch, ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(plan_batch_kv(batch, cache_));  // this drafter owns its cache
  if (eagle_ != nullptr) return eagle_->forward(batch, row_features_, cache_, logits_, out_features_, pool);
  return model_->forward(batch, cache_, logits_, pool, options_.n_layers);
}

void ModelDrafter::finish(Job& job) {
  for (const Row& r : job.rows) {
    if (r.id != job.seq->cache_id) free_cache_id(r.id);
  }
  job.rows.clear();
  cache_.truncate(job.seq->cache_id, static_cast<std::int64_t>(job.seq->cached.size()));
}

Status ModelDrafter::draft(std::span<const DraftRequest> requests, std::vector<DraftTree>& trees, ThreadPool& pool) {
  PEREGRINE_RETURN_IF_ERROR(validate_draft_requests(requests));
  PEREGRINE_RETURN_IF_ERROR(require_rng_for_sampled_chains(requests));
  trees.assign(requests.size(), DraftTree{});
  // EAGLE drafts over tokens[1, L): row p reads token p + 1 (and f_p); keep the new features.
  std::vector<DraftRequest> shifted;
  std::vector<std::size_t> origin;  // shifted[j] is requests[origin[j]]
  for (std::size_t i = 0; eagle_ != nullptr && i < requests.size(); ++i) {
    const DraftRequest& r = requests[i];
    if (r.features.size() % static_cast<std::size_t>(draft_config().dim) != 0) {
      return invalid_argument("draft request for sequence " + std::to_string(r.seq) + ": features are not rows of the hidden size");
    }
    sequence(r.seq).features.put(r.features_begin, r.features, draft_config().dim);
    if (r.tokens.size() < 2) continue;
    shifted.push_back(r);
    shifted.back().tokens = r.tokens.subspan(1);
    origin.push_back(i);
  }
  const std::span<const DraftRequest> work = eagle_ != nullptr ? std::span<const DraftRequest>(shifted) : requests;
  Batch batch;
  std::vector<Job> jobs = start_jobs(work, batch);
  Status st = Status::ok();
  while (batch.size() > 0) {
    st = run_forward(batch, pool);
    if (!st.is_ok()) break;
    grow(jobs, logits_);
    batch = next_batch(jobs);
  }
  for (Job& job : jobs) {
    if (st.is_ok()) trees[eagle_ != nullptr ? origin[job.index] : job.index] = job.builder.finish();
    finish(job);
  }
  return st;
}

void ModelDrafter::release(std::int32_t seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  free_cache_id(it->second.cache_id);
  seqs_.erase(it);
}

}  // namespace peregrine
