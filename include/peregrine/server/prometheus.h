// The engine's metrics in the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format): one
// "# HELP" and one "# TYPE" line per family, then its samples; histograms as cumulative
// _bucket{le="..."} lines ending with le="+Inf", then _sum and _count.
#pragma once

#include <string>

#include "peregrine/engine/metrics.h"

namespace peregrine {

/// The Content-Type of the format: "text/plain; version=0.0.4; charset=utf-8".
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

/// Families (all prefixed peregrine_): requests_total{status} counter;
/// time_to_first_token_seconds, inter_token_latency_seconds, e2e_request_latency_seconds
/// histograms; requests_running, requests_waiting, kv_blocks_used / _free / _total / _cached,
/// prefix_cache_hit_rate, prompt_tokens_per_second, generation_tokens_per_second gauges;
/// prompt_tokens_total, generation_tokens_total, preemptions_total counters.
std::string prometheus_text(const EngineMetrics& metrics);

}  // namespace peregrine
