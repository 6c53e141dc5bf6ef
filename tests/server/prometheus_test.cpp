#include "peregrine/server/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace peregrine {
namespace {

// Text exposition format 0.0.4: metric and label names, label values with \\ \" \n escapes,
// Go-style float values.
const std::regex kHelp(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
const std::regex kType(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
const std::regex kSample(
    R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? ([-+]?(Inf|NaN|[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?)))");

struct Sample {
  std::string name, labels;
  double value = 0;
};

EngineMetrics busy_metrics() {
  EngineMetrics m;
  m.requests_by_status = {{"stop", 7}, {"length", 3}, {"cancelled", 1}, {"rejected", 2}};
  for (double s : {0.0004, 0.002, 0.02, 0.02, 0.3, 1.5, 75.0}) m.ttft.observe(s);
  for (double s : {0.01, 0.011, 0.012}) m.itl.observe(s);
  m.running = 2;
  m.waiting = 1;
  m.kv_blocks_total = 64;
  m.kv_blocks_used = 10;
  m.kv_blocks_free = 54;
  m.kv_blocks_cached = 4;
  m.prefix_tokens_queried = 100;
  m.prefix_tokens_hit = 25;
  m.prompt_tokens_total = 1234;
  m.kv_bytes_shipped_total = 65536;
  m.generation_tokens_total = 567;
  m.prompt_tokens_per_s = 12.5;
  m.generation_tokens_per_s = 3.25;
  m.spec_draft_tokens_total = 80;
  m.spec_accepted_tokens_total = 60;
  m.spec_steps_total = 20;
  return m;
}

/// Parses the exposition, checking every line against the grammar and that every sample
/// belongs to a family declared (HELP then TYPE) before it.
std::vector<Sample> parse_exposition(const std::string& text, std::map<std::string, std::string>& types) {
  std::vector<Sample> samples;
  std::istringstream in(text);
  std::string pending_help;
  EXPECT_TRUE(text.ends_with("\n"));
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, kHelp)) {
      pending_help = m[1];
    } else if (std::regex_match(line, m, kType)) {
      EXPECT_EQ(m[1], pending_help) << "TYPE without its HELP: " << line;
      EXPECT_TRUE(types.emplace(m[1], m[2]).second) << "family declared twice: " << line;
    } else if (std::regex_match(line, m, kSample)) {
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (!types.contains(family) && family.ends_with(suffix)) family.resize(family.size() - std::strlen(suffix));
      }
      EXPECT_TRUE(types.contains(family)) << "sample before its # TYPE: " << line;
      samples.push_back({m[1], m[2], std::stod(m[8] == "+Inf" || m[8] == "Inf" ? std::string("inf") : m[8].str())});
    } else {
      ADD_FAILURE() << "not exposition format: '" << line << "'";
    }
  }
  return samples;
}

double value_of(const std::vector<Sample>& samples, const std::string& name, const std::string& labels = "") {
  for (const auto& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  ADD_FAILURE() << "no sample " << name << labels;
  return -1;
}

TEST(Prometheus, EveryLineParsesAndFamiliesAreTyped) {
  std::map<std::string, std::string> types;
  const auto samples = parse_exposition(prometheus_text(busy_metrics()), types);
  const std::map<std::string, std::string> expected = {
      {"peregrine_requests_total", "counter"},
      {"peregrine_time_to_first_token_seconds", "histogram"},
      {"peregrine_inter_token_latency_seconds", "histogram"},
      {"peregrine_e2e_request_latency_seconds", "histogram"},
      {"peregrine_requests_running", "gauge"},
      {"peregrine_requests_waiting", "gauge"},
      {"peregrine_kv_blocks_used", "gauge"},
      {"peregrine_kv_blocks_free", "gauge"},
      {"peregrine_kv_blocks_total", "gauge"},
      {"peregrine_kv_blocks_cached", "gauge"},
      {"peregrine_prefix_cache_hit_rate", "gauge"},
      {"peregrine_prompt_tokens_total", "counter"},
      {"peregrine_generation_tokens_total", "counter"},
      {"peregrine_prompt_tokens_per_second", "gauge"},
      {"peregrine_generation_tokens_per_second", "gauge"},
      {"peregrine_preemptions_total", "counter"},
      {"peregrine_spec_draft_tokens_total", "counter"},
      {"peregrine_spec_accepted_tokens_total", "counter"},
      {"peregrine_spec_verify_steps_total", "counter"},
      {"peregrine_spec_acceptance_rate", "gauge"},
      {"peregrine_spec_tokens_per_step", "gauge"},
      {"peregrine_weight_bytes_read_total", "counter"},
      {"peregrine_kv_bytes_shipped_total", "counter"},
      {"peregrine_lora_adapters_resident", "gauge"},
      {"peregrine_lora_loads_total", "counter"},
      {"peregrine_lora_evictions_total", "counter"},
  };
  EXPECT_EQ(types, expected);
  EXPECT_EQ(value_of(samples, "peregrine_requests_total", "{status=\"stop\"}"), 7);
  EXPECT_EQ(value_of(samples, "peregrine_requests_total", "{status=\"rejected\"}"), 2);
  EXPECT_EQ(value_of(samples, "peregrine_kv_blocks_free"), 54);
  EXPECT_EQ(value_of(samples, "peregrine_requests_running"), 2);
  EXPECT_DOUBLE_EQ(value_of(samples, "peregrine_prefix_cache_hit_rate"), 0.25);
  EXPECT_EQ(value_of(samples, "peregrine_prompt_tokens_total"), 1234);
  EXPECT_EQ(value_of(samples, "peregrine_kv_bytes_shipped_total"), 65536);
  EXPECT_DOUBLE_EQ(value_of(samples, "peregrine_spec_acceptance_rate"), 0.75);
  EXPECT_DOUBLE_EQ(value_of(samples, "peregrine_spec_tokens_per_step"), 4.0);
  EXPECT_DOUBLE_EQ(value_of(samples, "peregrine_generation_tokens_per_second"), 3.25);
}

TEST(Prometheus, HistogramBucketsAreCumulativeAndEndAtCount) {
  const EngineMetrics m = busy_metrics();
  std::map<std::string, std::string> types;
  const auto samples = parse_exposition(prometheus_text(m), types);
  for (const auto& [family, hist] : {std::pair{std::string("peregrine_time_to_first_token_seconds"), m.ttft},
                                     std::pair{std::string("peregrine_inter_token_latency_seconds"), m.itl},
                                     std::pair{std::string("peregrine_e2e_request_latency_seconds"), m.e2e}}) {
    double previous_le = -1, previous_count = 0;
    std::size_t buckets = 0;
    for (const auto& s : samples) {
      if (s.name != family + "_bucket") continue;
      ++buckets;
      const std::string le = s.labels.substr(5, s.labels.size() - 7);  // {le="..."}
      const double bound = le == "+Inf" ? INFINITY : std::stod(le);
      EXPECT_GT(bound, previous_le) << family;
      EXPECT_GE(s.value, previous_count) << family << " le=" << le;
      previous_le = bound;
      previous_count = s.value;
    }
    EXPECT_EQ(buckets, hist.bounds.size() + 1) << family;
    EXPECT_EQ(previous_le, INFINITY) << family << ": last bucket must be +Inf";
    EXPECT_EQ(previous_count, value_of(samples, family + "_count")) << family;
    EXPECT_EQ(value_of(samples, family + "_count"), static_cast<double>(hist.count));
    EXPECT_DOUBLE_EQ(value_of(samples, family + "_sum"), hist.sum);
  }
  EXPECT_EQ(value_of(samples, "peregrine_time_to_first_token_seconds_count"), 7);
  EXPECT_EQ(value_of(samples, "peregrine_time_to_first_token_seconds_bucket", "{le=\"+Inf\"}"), 7);
}

TEST(Prometheus, ExpertLoadOfAMixtureOfExpertsModelPerLayerAndExpert) {
  EngineMetrics m;
  m.n_experts = 3;
  m.expert_tokens = {5, 0, 7, 1, 2, 9};  // 2 layers x 3 experts
  m.weight_bytes_read_total = 123456789;
  std::map<std::string, std::string> types;
  const auto samples = parse_exposition(prometheus_text(m), types);
  EXPECT_EQ(types["peregrine_expert_tokens_total"], "counter");
  EXPECT_EQ(value_of(samples, "peregrine_expert_tokens_total", "{layer=\"0\",expert=\"2\"}"), 7);
  EXPECT_EQ(value_of(samples, "peregrine_expert_tokens_total", "{layer=\"1\",expert=\"0\"}"), 1);
  EXPECT_EQ(value_of(samples, "peregrine_weight_bytes_read_total"), 123456789);
}

TEST(Prometheus, EmptyMetricsStillParse) {
  std::map<std::string, std::string> types;
  const auto samples = parse_exposition(prometheus_text(EngineMetrics{}), types);
  EXPECT_EQ(value_of(samples, "peregrine_e2e_request_latency_seconds_count"), 0);
  EXPECT_EQ(value_of(samples, "peregrine_prefix_cache_hit_rate"), 0);
}

}  // namespace
}  // namespace peregrine
