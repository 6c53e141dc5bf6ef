#include "spec_options.h"

#include <limits>

#include "peregrine/spec/eagle_head.h"
#include "peregrine/spec/medusa_heads.h"
#include "peregrine/spec/medusa_drafter.h"
#include "peregrine/spec/model_drafter.h"

namespace peregrine::cli {
namespace {

Expected<std::unique_ptr<LlamaModel>> load(const ModelOptions& o, ThreadPool& pool) {
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile file, open_model(o, &pool));
  PEREGRINE_ASSIGN_OR_RETURN(LlamaModel model, LlamaModel::create(std::move(file), weight_placement(o)));
  return std::make_unique<LlamaModel>(std::move(model));
}

Expected<std::int32_t> draft_kv_blocks(std::int64_t ctx, std::int32_t n_seqs) {
  // Each sequence's context, plus per sequence one block per possible tree branch (forks
  // copy their partially filled last block on write).
  const std::int64_t per_seq = blocks_for_tokens(ctx + kMaxDraftNodes + 1, kDefaultKvBlockSize) + kMaxDraftNodes;
  const std::int64_t blocks = per_seq * n_seqs;
  if (blocks > std::numeric_limits<std::int32_t>::max()) return out_of_range("the draft KV cache would be too large");
  return static_cast<std::int32_t>(blocks);
}

}  // namespace

void add_spec_options(CLI::App& cmd, SpecOptions& o) {
  cmd.add_option("--spec", o.method, "Speculative decoding: none, pld (prompt lookup), draft (--draft-model), "
                                     "layerskip (--draft-layers), quant (--draft-dtype), medusa or eagle (--draft-model "
                                     "HEAD_DIR)")
      ->capture_default_str();
  cmd.add_option("--draft-max", o.draft_max, "Draft tokens (tree nodes) per step at most (chains of up to 6: greedy output bit-identical to plain decoding; longer chains and trees: up to a near tie)")->capture_default_str();
  cmd.add_option("--draft-branching", o.branching, "Children per expanded draft node (1 = chain, > 1 = token tree)")
      ->capture_default_str();
  cmd.add_flag("--draft-adaptive", o.adaptive, "Adapt the draft length to the running acceptance rate");
  cmd.add_option("--draft-model", o.draft_model,
                 "Draft model for --spec draft (same vocabulary as the target); the head folder for --spec medusa / eagle");
  cmd.add_option("--draft-layers", o.draft_layers, "Layers of the target that draft for --spec layerskip");
  cmd.add_option("--draft-dtype", o.draft_dtype, "Weight type of the target's copy that drafts for --spec quant")
      ->capture_default_str();
  cmd.add_option("--draft-min-confidence", o.min_confidence,
                 "Model drafters stop expanding a draft below this path probability (0 = never)")
      ->capture_default_str();
  cmd.add_option("--draft-context", o.draft_context,
                 "--spec draft / layerskip / quant: the draft model sees a long prompt as its first 4 tokens and its last N "
                 "(a short draft prefill; output unchanged, the target verifies; 0 = the whole context)")
      ->capture_default_str();
}

Expected<SpecParams> spec_params(const SpecOptions& o) {
  PEREGRINE_ASSIGN_OR_RETURN(SpecMethod method, parse_spec_method(o.method));
  if (!o.draft_model.empty() && method != SpecMethod::kDraft && method != SpecMethod::kMedusa && method != SpecMethod::kEagle) {
    return invalid_argument("--draft-model is only used with --spec draft, medusa or eagle");
  }
  if (o.draft_layers != 0 && method != SpecMethod::kLayerSkip) {
    return invalid_argument("--draft-layers is only used with --spec layerskip");
  }
  if (o.draft_context != 0 && method != SpecMethod::kDraft && method != SpecMethod::kLayerSkip && method != SpecMethod::kQuant) {
    return invalid_argument("--draft-context is only used with --spec draft, layerskip or quant");
  }
  if (o.draft_context < 0) return invalid_argument("--draft-context must be >= 0 (got " + std::to_string(o.draft_context) + ")");
  SpecParams p{method, o.draft_max, o.branching, o.adaptive};
  PEREGRINE_RETURN_IF_ERROR(p.validate());
  return p;
}

Expected<DrafterSetup> make_drafter(const SpecOptions& o, const LlamaModel& target, const ModelOptions& target_options,
                                    std::int64_t ctx, std::int32_t n_seqs, ThreadPool& pool) {
  PEREGRINE_ASSIGN_OR_RETURN(SpecParams params, spec_params(o));
  DrafterSetup setup;
  ModelDrafterOptions d;
  d.method = params.method;
  d.min_confidence = o.min_confidence;
  d.context_window = o.draft_context;
  PEREGRINE_ASSIGN_OR_RETURN(d.kv_blocks, draft_kv_blocks(ctx, n_seqs));
  const LlamaModel* draft = &target;
  switch (params.method) {
    case SpecMethod::kNone:
    case SpecMethod::kPld:
      return setup;
    case SpecMethod::kMedusa: {
      if (o.draft_model.empty()) return invalid_argument("--spec medusa needs --draft-model HEADS_DIR (train-draft --kind medusa)");
      PEREGRINE_ASSIGN_OR_RETURN(MedusaHeads heads, load_medusa_heads(o.draft_model, target.config().dim, target.config().vocab_size));
      PEREGRINE_ASSIGN_OR_RETURN(setup.drafter, MedusaDrafter::create(std::move(heads), target.config()));
      return setup;
    }
    case SpecMethod::kEagle: {
      if (o.draft_model.empty()) return invalid_argument("--spec eagle needs --draft-model HEAD_DIR (train-draft --kind eagle)");
      PEREGRINE_ASSIGN_OR_RETURN(EagleHead head, load_eagle_head(o.draft_model, target.config().dim, target.config().vocab_size));
      PEREGRINE_ASSIGN_OR_RETURN(setup.eagle, EagleLayer::create(std::move(head), target));
      PEREGRINE_ASSIGN_OR_RETURN(setup.drafter, ModelDrafter::create_eagle(*setup.eagle, target.config(), d));
      return setup;
    }
    case SpecMethod::kDraft: {
      if (o.draft_model.empty()) return invalid_argument("--spec draft needs --draft-model PATH");
      PEREGRINE_ASSIGN_OR_RETURN(setup.model, load(ModelOptions{o.draft_model, "", ""}, pool));
      draft = setup.model.get();
      break;
    }
    case SpecMethod::kLayerSkip: {
      const std::int64_t n = target.config().n_layers;
      if (o.draft_layers < 1 || o.draft_layers >= n) {
        return invalid_argument("--spec layerskip needs --draft-layers K with 1 <= K < " + std::to_string(n) +
                                " (the target's layers)");
      }
      d.n_layers = o.draft_layers;
      break;
    }
    case SpecMethod::kQuant: {
      ModelOptions quant = target_options;
      quant.dtype = o.draft_dtype;
      quant.tp = quant.pp = 1;  // under --tp / --pp every rank drafts with a whole quantized copy
      PEREGRINE_ASSIGN_OR_RETURN(setup.model, load(quant, pool));
      draft = setup.model.get();
      break;
    }
  }
  PEREGRINE_ASSIGN_OR_RETURN(auto drafter, ModelDrafter::create(*draft, target.config(), d));
  setup.drafter = std::move(drafter);
  return setup;
}

}  // namespace peregrine::cli
