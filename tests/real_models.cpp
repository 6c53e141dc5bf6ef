#include "real_models.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "test_paths.h"

namespace peregrine::test {
namespace {

std::string cache_dir() {
  const char* env = std::getenv("PEREGRINE_MODEL_CACHE");
  return env != nullptr && *env != '\0' ? std::string(env) : source_dir() + "/models/cache";
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, sep);) out.push_back(field);
  return out;
}

std::vector<RealModelEntry> read_manifest() {
  const std::string path = source_dir() + "/models/real_models.tsv";
  std::ifstream in(path);
  std::vector<RealModelEntry> out;
  bool header = true;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> f = split(line, '\t');
    if (header) {
      header = false;
      continue;
    }
    if (f.size() < 8) {
      ADD_FAILURE() << path << ": a row with " << f.size() << " fields (8 expected): " << line;
      continue;
    }
    out.push_back({f[0], f[1], f[3], cache_dir() + "/" + f[0] + ".gguf"});
  }
  if (out.empty()) ADD_FAILURE() << path << " lists no model";
  return out;
}

}  // namespace

const std::vector<RealModelEntry>& real_models() {
  static const std::vector<RealModelEntry> models = read_manifest();
  return models;
}

std::vector<std::string> real_model_names() {
  std::vector<std::string> names;
  for (const RealModelEntry& e : real_models()) names.push_back(e.name);
  return names;
}

std::string real_model_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

RealModelEntry real_model(const std::string& name) {
  for (const RealModelEntry& e : real_models()) {
    if (e.name == name) return e;
  }
  ADD_FAILURE() << "no model '" << name << "' in models/real_models.tsv";
  return {};
}

bool real_model_required(const std::string& name) {
  const char* env = std::getenv("PEREGRINE_REQUIRE_REAL_MODELS");
  if (env == nullptr) return false;
  for (const std::string& n : split(env, ',')) {
    if (n == "all" || n == name) return true;
  }
  return false;
}

LoadedRealModel load_manifest_model(const RealModelEntry& entry) {
  auto file = load_model_file(entry.path);
  EXPECT_TRUE(file) << file.status().message();
  if (!file) return {};
  auto tok = load_tokenizer(*file);
  EXPECT_TRUE(tok) << tok.status().message();
  auto model = LlamaModel::create(std::move(*file));
  EXPECT_TRUE(model) << model.status().message();
  if (!tok || !model) return {};
  return {std::make_unique<LlamaModel>(std::move(*model)), std::move(*tok)};
}

nlohmann::json llamacpp_reference(const std::string& name) {
  const std::string path = source_dir() + "/tests/reference/llamacpp/" + name + ".json";
  const std::string text = read_file(path);
  if (text.empty()) return nullptr;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << path << ": " << e.what();
    return nullptr;
  }
}

}  // namespace peregrine::test
