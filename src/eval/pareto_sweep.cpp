#include "peregrine/eval/pareto_sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "peregrine/prune/gguf_storage.h"

namespace peregrine {
namespace {

Expected<ModelFile> pruned_model(const ParetoSweep& s, const ParetoConfig& c, ThreadPool& pool) {
  PruneOptions o = c.prune;
  o.calib_path = s.calib_path;
  if (c.recipe == ParetoRecipe::kLayerDrop) {
    const double layers = static_cast<double>(s.reference_file.config.n_layers);
    o.drop_layers = std::max<std::int64_t>(1, std::llround(c.drop_fraction * layers));
  }
  PruneReport rep;
  PEREGRINE_ASSIGN_OR_RETURN(ModelFile pruned, prune_model(s.reference_file, &s.tokenizer, o, pool, &rep));
  if (rep.pruned_linears.empty()) return pruned;
  return gguf_storage(pruned, o.target, rep.pruned_linears, rep.notes);
}

/// Quality and speed of `model` (built from `file`) into a point of `c`.
Expected<ParetoPoint> measure(const ParetoSweep& s, const ParetoConfig& c, const LlamaModel& model, double weight_bytes,
                              ThreadPool& pool) {
  PEREGRINE_ASSIGN_OR_RETURN(const LogitComparison q, compare_logits(s.reference_logits, model, s.tokens, c.kv_type, pool));
  BenchParams bench = s.bench;
  bench.kv_type = c.kv_type;
  PEREGRINE_ASSIGN_OR_RETURN(const BenchResult speed, run_bench(model, bench, pool));
  ParetoPoint p{c.name, c.technique, c.describe};
  p.kld = q.mean_kl;
  p.top1 = q.top1_agreement;
  p.ppl = q.candidate_ppl;
  p.ref_ppl = q.reference_ppl;
  p.weight_bytes = weight_bytes;
  p.decode_bytes = speed.tg_weight_bytes;
  p.decode_tps = mean_sd(speed.tg_tps).mean;
  p.prefill_tps = mean_sd(speed.pp_tps).mean;
  return p;
}

}  // namespace

Expected<ModelFile> build_pareto_model(const ParetoSweep& s, const ParetoConfig& c, ThreadPool& pool) {
  switch (c.recipe) {
    case ParetoRecipe::kReference: return s.reference_file;
    case ParetoRecipe::kQuantize: {
      QuantizeOptions o = c.quant;
      o.calib_path = s.calib_path;
      return quantize_model(s.reference_file, &s.tokenizer, o, pool);
    }
    case ParetoRecipe::kPrune:
    case ParetoRecipe::kLayerDrop: return pruned_model(s, c, pool);
  }
  return invalid_argument("build_pareto_model: unknown recipe");
}

Expected<ParetoPoint> measure_pareto_point(const ParetoSweep& s, const ParetoConfig& c, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  Expected<ParetoPoint> p = [&]() -> Expected<ParetoPoint> {
    if (c.recipe == ParetoRecipe::kReference) {
      auto p = measure(s, c, s.reference, static_cast<double>(s.reference_file.weight_bytes()), pool);
      if (p && s.reference_in_place) p->describe += " (weights read in place, as --mmap)";
      return p;
    }
    PEREGRINE_ASSIGN_OR_RETURN(ModelFile file, build_pareto_model(s, c, pool));
    const auto bytes = static_cast<double>(file.weight_bytes());
    PEREGRINE_ASSIGN_OR_RETURN(const LlamaModel model, LlamaModel::create(std::move(file)));
    return measure(s, c, model, bytes, pool);
  }();
  if (p) p->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

}  // namespace peregrine
