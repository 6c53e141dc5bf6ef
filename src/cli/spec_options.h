// The speculative-decoding options shared by generate, serve and bench (--spec, --draft-*), and
// the drafter they set up.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "common.h"
#include "peregrine/model/llama_model.h"
#include "peregrine/spec/drafter.h"
#include "peregrine/spec/eagle_layer.h"
#include "peregrine/spec/spec_params.h"

namespace peregrine::cli {

struct SpecOptions {
  std::string method = "none";  // --spec none|pld|draft|layerskip|quant
  std::int32_t draft_max = 4;   // --draft-max
  std::int32_t branching = 1;   // --draft-branching (> 1: token trees)
  bool adaptive = false;        // --draft-adaptive
  std::string draft_model;      // --draft-model PATH (draft; medusa / eagle: the head folder)
  std::int64_t draft_layers = 0;      // --draft-layers K (layerskip)
  std::string draft_dtype = "q4_0";   // --draft-dtype (quant)
  float min_confidence = 0.0f;        // --draft-min-confidence (model drafters)
  std::int64_t draft_context = 0;     // --draft-context N (draft, layerskip, quant)
};

/// Adds --spec, --draft-max, --draft-branching, --draft-adaptive, --draft-model,
/// --draft-layers, --draft-dtype, --draft-min-confidence and --draft-context to `cmd`.
void add_spec_options(CLI::App& cmd, SpecOptions& o);

/// The SpecParams the options ask for. Errors: kInvalidArgument (unknown method, ranges of
/// SpecParams::validate, a --draft-* option that the method does not use).
Expected<SpecParams> spec_params(const SpecOptions& o);

/// A model drafter and the draft model it runs (null when it runs the target itself).
struct DrafterSetup {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<EagleLayer> eagle;  // --spec eagle's head
  std::unique_ptr<Drafter> drafter;  // null for none / pld
};

/// Builds the drafter of o.method: draft → --draft-model loaded as is; medusa → the Medusa head
/// folder --draft-model (spec/medusa_heads.h); eagle → the EAGLE head folder --draft-model
/// (spec/eagle_head.h) run by a ModelDrafter; layerskip → the target's
/// first --draft-layers layers; quant → the target's file converted to --draft-dtype. Its KV
/// pool holds `n_seqs` sequences of `ctx` positions plus room for draft trees.
/// Errors: kInvalidArgument (a missing --draft-model / --draft-layers, --draft-layers outside
/// [1, n_layers - 1]), those of open_model / LlamaModel::create / ModelDrafter::create.
Expected<DrafterSetup> make_drafter(const SpecOptions& o, const LlamaModel& target, const ModelOptions& target_options,
                                    std::int64_t ctx, std::int32_t n_seqs, ThreadPool& pool);

}  // namespace peregrine::cli
