// The measured points of a quality-vs-compute sweep and what a user reads off them: the Pareto
// front (no other point is at least as good on both axes and better on one) and the fastest
// configuration within a quality budget (seed 002's closing picture).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace peregrine {

/// One configuration measured by `peregrine pareto`.
struct ParetoPoint {
  std::string name, technique, describe;  // the configuration's (eval/pareto_configs.h)
  double kld = 0.0;             // mean KL(reference || this) per scored token, nats
  double top1 = 1.0;            // share of positions whose argmax agrees with the reference's
  double ppl = 0.0;             // perplexity on the evaluation text
  double ref_ppl = 0.0;         // the reference's perplexity on the same tokens
  double weight_bytes = 0.0;    // bytes of every tensor, as held in memory
  double decode_bytes = 0.0;    // weight bytes one decode step reads (bench's tg_weight_bytes)
  double decode_tps = 0.0;      // tokens/s of one sequence's decode (tg)
  double prefill_tps = 0.0;     // tokens/s of one prompt's prefill (pp)
  double seconds = 0.0;         // wall time of building, evaluating and timing it

  /// Perplexity increase over the reference, in percent.
  double ppl_increase_pct() const { return ref_ppl > 0.0 ? 100.0 * (ppl / ref_ppl - 1.0) : 0.0; }
};

/// The axes a front is taken over: lower KLD is better on quality; on cost, higher decode
/// tokens/s (kSpeed) or fewer weight bytes (kSize).
enum class ParetoAxis : std::uint8_t { kSpeed, kSize };

/// Indices of the points no other point dominates on (kld, `axis`), ordered from the lowest
/// KLD to the highest (cost improving along the front). Equal points are all kept.
std::vector<std::size_t> pareto_front(const std::vector<ParetoPoint>& points, ParetoAxis axis);

/// A quality budget: a configuration qualifies when its KLD and its perplexity increase are at
/// most these (nullopt: no bound).
struct QualityBudget {
  std::optional<double> max_kld;               // nats
  std::optional<double> max_ppl_increase_pct;  // percent over the reference's perplexity
};

/// The index of the fastest decoding point within `budget` (ties: the smaller one), or nullopt
/// when none qualifies.
std::optional<std::size_t> recommend(const std::vector<ParetoPoint>& points, const QualityBudget& budget);

}  // namespace peregrine
