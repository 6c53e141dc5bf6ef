#include "parity_cases.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace peregrine::test {
namespace {

// The raw float32 [n_tokens, vocab] file `name` of the testdata folder.
std::vector<float> read_logits(const std::string& name, std::size_t n_tokens, std::int64_t vocab) {
  std::vector<float> out(n_tokens * static_cast<std::size_t>(vocab));
  std::ifstream lf(testdata_dir() + "/" + name, std::ios::binary);
  lf.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
  return out;
}

}  // namespace

std::vector<Case> load_cases() {
  const std::string dir = testdata_dir();
  std::ifstream in(dir + "/manifest.json");
  std::vector<Case> cases;
  if (!in) return cases;
  for (const auto& e : nlohmann::json::parse(in)) {
    Case c;
    c.name = e["name"];
    const std::string model = e["model"];
    c.model = model.starts_with("/") ? model : dir + "/" + model;
    c.tokens = e["tokens"].get<std::vector<std::int32_t>>();
    c.vocab = e["vocab"];
    c.logits = read_logits(e["logits"], c.tokens.size(), c.vocab);
    if (e.contains("decode_logits")) c.decode_logits = read_logits(e["decode_logits"], c.tokens.size(), c.vocab);
    if (e.contains("lora")) c.lora = dir + "/" + e["lora"].get<std::string>();
    cases.push_back(std::move(c));
  }
  return cases;
}


}  // namespace peregrine::test
