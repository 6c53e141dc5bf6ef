#include "peregrine/server/prometheus.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace peregrine {
namespace {

/// A sample value in the shortest "%g" form that reads back as the same double (0.005, not
/// 0.0050000000000000001); NaN / ±Inf spelled as the format wants.
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

class Writer {
 public:
  void family(std::string_view name, std::string_view type, std::string_view help) {
    out_ += "# HELP peregrine_";
    (out_ += name) += ' ';
    (out_ += help) += "\n# TYPE peregrine_";
    (out_ += name) += ' ';
    (out_ += type) += '\n';
  }
  void sample(std::string_view name, double value, std::string_view labels = {}) {
    (out_ += "peregrine_") += name;
    if (!labels.empty()) ((out_ += '{') += labels) += '}';
    (out_ += ' ') += number(value);
    out_ += '\n';
  }
  void gauge(std::string_view name, std::string_view help, double value) {
    family(name, "gauge", help);
    sample(name, value);
  }
  void counter(std::string_view name, std::string_view help, double value) {
    family(name, "counter", help);
    sample(name, value);
  }
  void histogram(std::string_view name, std::string_view help, const Histogram& h) {
    family(name, "histogram", help);
    const std::string base(name);
    std::int64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(base + "_bucket", static_cast<double>(cumulative), "le=\"" + number(h.bounds[i]) + "\"");
    }
    sample(base + "_bucket", static_cast<double>(h.count), "le=\"+Inf\"");
    sample(base + "_sum", h.sum);
    sample(base + "_count", static_cast<double>(h.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

/// A label value with \, " and newline escaped.
std::string label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

}  // namespace

std::string prometheus_text(const EngineMetrics& m) {
  Writer w;
  w.family("requests_total", "counter", "Finished requests by status (stop, length, cancelled, error, rejected).");
  for (const auto& [status, n] : m.requests_by_status) {
    w.sample("requests_total", static_cast<double>(n), "status=\"" + label_value(status) + "\"");
  }
  w.histogram("time_to_first_token_seconds", "Time from submission to the first sampled token.", m.ttft);
  w.histogram("inter_token_latency_seconds", "Time between consecutive sampled tokens of a request.", m.itl);
  w.histogram("e2e_request_latency_seconds", "Time from submission to the end of a request.", m.e2e);
  w.gauge("requests_running", "Requests with KV cache in use.", static_cast<double>(m.running));
  w.gauge("requests_waiting", "Queued requests, preempted ones included.", static_cast<double>(m.waiting));
  w.gauge("kv_blocks_used", "KV blocks referenced by running requests.", static_cast<double>(m.kv_blocks_used));
  w.gauge("kv_blocks_free", "KV blocks free or evictable from the prefix cache.", static_cast<double>(m.kv_blocks_free));
  w.gauge("kv_blocks_total", "KV blocks in the pool.", static_cast<double>(m.kv_blocks_total));
  w.gauge("kv_blocks_cached", "KV blocks held by the prefix cache.", static_cast<double>(m.kv_blocks_cached));
  w.gauge("prefix_cache_hit_rate", "Prompt tokens served from the prefix cache / prompt tokens looked up.",
          m.prefix_hit_rate());
  w.counter("prompt_tokens_total", "Prompt tokens computed (prefix-cache hits excluded).",
            static_cast<double>(m.prompt_tokens_total));
  w.counter("generation_tokens_total", "Tokens sampled.", static_cast<double>(m.generation_tokens_total));
  w.gauge("prompt_tokens_per_second", "Prompt tokens computed per second over the last ~10 s.", m.prompt_tokens_per_s);
  w.gauge("generation_tokens_per_second", "Tokens sampled per second over the last ~10 s.", m.generation_tokens_per_s);
  w.counter("preemptions_total", "Requests preempted (blocks freed, recomputed later).",
            static_cast<double>(m.preemptions_total));
  w.counter("spec_draft_tokens_total", "Speculative draft tokens proposed (finished requests).",
            static_cast<double>(m.spec_draft_tokens_total));
  w.counter("spec_accepted_tokens_total", "Speculative draft tokens accepted (finished requests).",
            static_cast<double>(m.spec_accepted_tokens_total));
  w.counter("spec_verify_steps_total", "Speculative verification steps (finished requests).",
            static_cast<double>(m.spec_steps_total));
  w.gauge("spec_acceptance_rate", "Accepted / proposed draft tokens.", m.spec_acceptance_rate());
  w.gauge("spec_tokens_per_step", "Tokens emitted per verification step (accepted + 1).", m.spec_tokens_per_step());
  w.counter("weight_bytes_read_total", "Weight bytes read by the model's matrix products.",
            static_cast<double>(m.weight_bytes_read_total));
  w.counter("kv_bytes_shipped_total", "K/V cache bytes a disaggregated prefill instance shipped to this one (serve --role decode).",
            static_cast<double>(m.kv_bytes_shipped_total));
  w.gauge("lora_adapters_resident", "LoRA adapters in memory (serve --max-loras caps them).",
          static_cast<double>(m.lora_adapters_resident));
  w.counter("lora_loads_total", "LoRA adapter loads, at startup and on demand.", static_cast<double>(m.lora_loads_total));
  w.counter("lora_evictions_total", "LoRA adapters evicted (least recently used) to load another.",
            static_cast<double>(m.lora_evictions_total));
  if (m.n_experts > 0) {
    w.family("expert_tokens_total", "counter", "Tokens routed to each expert of each Mixture-of-Experts layer.");
    for (std::size_t i = 0; i < m.expert_tokens.size(); ++i) {
      const auto n_experts = static_cast<std::size_t>(m.n_experts);
      w.sample("expert_tokens_total", static_cast<double>(m.expert_tokens[i]),
               "layer=\"" + std::to_string(i / n_experts) + "\",expert=\"" + std::to_string(i % n_experts) + "\"");
    }
  }
  return w.take();
}

}  // namespace peregrine
