// Hugging Face tokenizer.json: files synthesized from the GGUF vocabularies must tokenize the
// llama.cpp test vectors exactly like the GGUF itself.
#include "peregrine/tokenizer/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "peregrine/formats/gguf/gguf.h"
#include "peregrine/tokenizer/pretokenizer.h"
#include "peregrine/tokenizer/tokenizer.h"
#include "peregrine/tokenizer/utf8.h"
#include "test_util.h"

namespace peregrine {
namespace {

using json = nlohmann::json;

struct GgufVocab {
  std::vector<std::string> tokens;
  std::vector<double> scores;
  std::vector<double> types;
  std::vector<std::string> merges;
};

GgufVocab read_gguf(const std::string& name) {
  GgufVocab v;
  auto g = GgufFile::open(test::vocab_dir() + "/ggml-vocab-" + name + ".gguf");
  EXPECT_TRUE(g) << g.status().message();
  v.tokens = g->get_string_array("tokenizer.ggml.tokens").value();
  v.types = g->get_number_array("tokenizer.ggml.token_type").value();
  if (auto s = g->get_number_array("tokenizer.ggml.scores")) v.scores = *s;
  if (auto m = g->get_string_array("tokenizer.ggml.merges")) v.merges = *m;
  return v;
}

// vocab (normal pieces) + added_tokens (the others, special when control).
void put_vocab(const GgufVocab& v, json& j) {
  json vocab = json::object();
  json added = json::array();
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    const int type = static_cast<int>(v.types[id]);
    if (type == 3 || type == 4) {
      added.push_back({{"id", id}, {"content", v.tokens[id]}, {"special", type == 3}});
      if (type == 3) continue;
    }
    vocab[v.tokens[id]] = id;
  }
  j["model"]["vocab"] = vocab;
  j["added_tokens"] = added;
}

std::string write_json(const json& j, const test::TempDir& dir) {
  std::ofstream(dir.path + "/tokenizer.json") << j.dump();
  return dir.path + "/tokenizer.json";
}

void expect_vectors(const Tokenizer& tok, const std::string& name) {
  const std::string base = test::vocab_dir() + "/ggml-vocab-" + name + ".gguf";
  const auto inputs = test::split_inputs(test::read_file(base + ".inp"));
  const auto outputs = test::parse_outputs(test::read_file(base + ".out"));
  ASSERT_EQ(inputs.size(), outputs.size());
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto got = tok.encode(inputs[i], false);
    if (got != outputs[i]) {
      ++mismatches;
      ADD_FAILURE() << name << " #" << i << " " << test::escaped(inputs[i]) << "\n  expected "
                    << test::ids_string(outputs[i]) << "\n  got      " << test::ids_string(got);
    }
    EXPECT_EQ(tok.decode(got), inputs[i]) << test::escaped(inputs[i]);
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(HfTokenizerJson, Gpt2ByteLevel) {
  const GgufVocab v = read_gguf("gpt-2");
  json j;
  j["model"] = {{"type", "BPE"}, {"merges", v.merges}};
  put_vocab(v, j);
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  test::TempDir dir;
  auto tok = load_tokenizer_file(write_json(j, dir));
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "bpe");
  EXPECT_EQ((*tok)->bos_id(), 50256);
  EXPECT_EQ((*tok)->eos_id(), 50256);
  expect_vectors(**tok, "gpt-2");
}

TEST(HfTokenizerJson, SplitSequenceAndPairMerges) {
  const GgufVocab v = read_gguf("starcoder");
  json merges = json::array();
  for (const auto& m : v.merges) {
    const auto sp = m.find(' ', 1);
    merges.push_back({m.substr(0, sp), m.substr(sp + 1)});
  }
  json j;
  j["model"] = {{"type", "BPE"}, {"merges", merges}};
  put_vocab(v, j);
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "Split"}, {"pattern", {{"Regex", gpt2_regex()}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  test::TempDir dir;
  auto tok = load_tokenizer_file(write_json(j, dir));
  ASSERT_TRUE(tok) << tok.status().message();
  expect_vectors(**tok, "starcoder");
}

// Merges as transformers' SentencePiece converter derives them: every split of a normal piece
// into two pieces, ordered by the piece's score (then by the parts' ids).
json spm_merges(const GgufVocab& v) {
  std::unordered_map<std::string, std::size_t> ids;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], i);
  struct M { double score; std::size_t l, r; };
  std::vector<M> all;
  for (std::size_t id = 0; id < v.tokens.size(); ++id) {
    if (static_cast<int>(v.types[id]) != 1) continue;
    const std::string& p = v.tokens[id];
    std::vector<M> local;
    for (std::size_t cut = utf8_char_length(p, 0); cut < p.size(); cut += utf8_char_length(p, cut)) {
      auto l = ids.find(p.substr(0, cut));
      auto r = ids.find(p.substr(cut));
      if (l != ids.end() && r != ids.end()) local.push_back({v.scores[id], l->second, r->second});
    }
    std::sort(local.begin(), local.end(), [](const M& a, const M& b) { return std::tie(a.l, a.r) < std::tie(b.l, b.r); });
    all.insert(all.end(), local.begin(), local.end());
  }
  std::stable_sort(all.begin(), all.end(), [](const M& a, const M& b) { return a.score > b.score; });
  json merges = json::array();
  for (const auto& m : all) merges.push_back(v.tokens[m.l] + " " + v.tokens[m.r]);
  return merges;
}

json llama_json(const GgufVocab& v) {
  json j;
  j["model"] = {{"type", "BPE"}, {"byte_fallback", true}, {"unk_token", "<unk>"}, {"merges", spm_merges(v)}};
  put_vocab(v, j);
  return j;
}

TEST(HfTokenizerJson, MetaspacePreTokenizer) {
  const GgufVocab v = read_gguf("llama-spm");
  json j = llama_json(v);
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "first"}, {"split", false}};
  test::TempDir dir;
  auto tok = load_tokenizer_file(write_json(j, dir));
  ASSERT_TRUE(tok) << tok.status().message();
  expect_vectors(**tok, "llama-spm");
  // split=true: merges stay inside "▁"-initial words, so no piece has an inner "▁".
  j["pre_tokenizer"]["split"] = true;
  auto split = load_tokenizer_file(write_json(j, dir));
  ASSERT_TRUE(split) << split.status().message();
  const std::string text = "a  b   c\n  d";
  const auto ids = (*split)->encode(text, false);
  EXPECT_EQ((*split)->decode(ids), text);
  for (auto id : ids) EXPECT_EQ((*split)->piece(id).find("\xE2\x96\x81", 1), std::string::npos) << (*split)->piece(id);
}

TEST(HfTokenizerJson, LlamaMetaspaceByteFallback) {
  json j = llama_json(read_gguf("llama-spm"));
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                       {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}};
  j["pre_tokenizer"] = nullptr;
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}};
  test::TempDir dir;
  auto tok = load_tokenizer_file(write_json(j, dir));
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ((*tok)->kind(), "spm");
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_EQ((*tok)->eos_id(), 2);
  EXPECT_TRUE((*tok)->add_bos_default());
  expect_vectors(**tok, "llama-spm");
}

TEST(HfTokenizerJson, Errors) {
  auto not_json = parse_hf_tokenizer_json("{not json", "t.json");
  ASSERT_FALSE(not_json);
  EXPECT_EQ(not_json.status().code(), ErrorCode::kCorruptFile);
  auto unigram = parse_hf_tokenizer_json(R"({"model": {"type": "Unigram", "vocab": []}})", "t.json");
  ASSERT_FALSE(unigram);
  EXPECT_EQ(unigram.status().code(), ErrorCode::kUnsupported);
  auto bad_id = parse_hf_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})", "t.json");
  ASSERT_FALSE(bad_id);
  EXPECT_EQ(bad_id.status().code(), ErrorCode::kCorruptFile);
  auto bad_merge = parse_hf_tokenizer_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [3]}, "decoder": {"type": "ByteLevel"}})", "t.json");
  ASSERT_FALSE(bad_merge);
  EXPECT_EQ(bad_merge.status().code(), ErrorCode::kCorruptFile);
  auto wrong_types = parse_hf_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": "1"}]})", "t.json");
  ASSERT_FALSE(wrong_types);
  EXPECT_EQ(wrong_types.status().code(), ErrorCode::kCorruptFile);
}

// A minimal byte-level tokenizer.json whose pre_tokenizer is `pre` (JSON text).
std::string with_pre_tokenizer(const std::string& pre) {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}, "pre_tokenizer": )" +
         pre + "}";
}

// `levels` Sequence pre-tokenizers inside each other around a ByteLevel one, built as text
// (nlohmann's dump() would itself recurse that deep).
std::string nested_sequences(std::size_t levels) {
  std::string s;
  for (std::size_t i = 0; i < levels; ++i) s += R"({"type": "Sequence", "pretokenizers": [)";
  s += R"({"type": "ByteLevel"})";
  for (std::size_t i = 0; i < levels; ++i) s += "]}";
  return s;
}

TEST(HfTokenizerJson, DeeplyNestedJsonIsACleanError) {
  auto deep = parse_hf_tokenizer_json(with_pre_tokenizer(nested_sequences(200000)), "deep.json");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(deep.status().message().find("deep.json"), std::string::npos) << deep.status().message();
  EXPECT_NE(deep.status().message().find("nested deeper"), std::string::npos) << deep.status().message();
  // Under the JSON depth limit but still absurdly many Sequences inside each other.
  auto sequences = parse_hf_tokenizer_json(with_pre_tokenizer(nested_sequences(20)), "seq.json");
  ASSERT_FALSE(sequences);
  EXPECT_EQ(sequences.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(sequences.status().message().find("Sequences deeper"), std::string::npos) << sequences.status().message();
  // A few levels are fine.
  auto ok = parse_hf_tokenizer_json(with_pre_tokenizer(nested_sequences(3)), "ok.json");
  ASSERT_TRUE(ok) << ok.status().message();
  EXPECT_EQ((*ok)->encode("ab", false), std::vector<std::int32_t>{2});
}

TEST(HfTokenizerJson, DuplicateKeysAreRejected) {
  auto dup = parse_hf_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {"a": 0, "a": 1}, "merges": []},
                                        "pre_tokenizer": {"type": "ByteLevel"}})",
                                     "dup.json");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(dup.status().message().find("duplicate"), std::string::npos) << dup.status().message();
}

TEST(HfTokenizerJson, TokenizerConfigIsReadStrictly) {
  test::TempDir dir;
  const std::string path = dir.path + "/tokenizer.json";
  std::ofstream(path) << with_pre_tokenizer(R"({"type": "ByteLevel"})");
  const std::string cfg = dir.path + "/tokenizer_config.json";
  {  // absent: defaults
    auto tok = load_hf_tokenizer_json(path);
    ASSERT_TRUE(tok) << tok.status().message();
    EXPECT_FALSE((*tok)->add_bos_default());
  }
  {  // present and valid: its hints apply
    std::ofstream(cfg) << R"({"bos_token": {"content": "a"}, "add_bos_token": true})";
    auto tok = load_hf_tokenizer_json(path);
    ASSERT_TRUE(tok) << tok.status().message();
    EXPECT_EQ((*tok)->bos_id(), 0);
    EXPECT_TRUE((*tok)->add_bos_default());
  }
  for (const std::string bad : {"{\"bos_token\": ", "[1, 2]", "{\"add_bos_token\": true, \"add_bos_token\": false}", ""}) {
    std::ofstream(cfg, std::ios::trunc) << bad;
    auto tok = load_hf_tokenizer_json(path);
    ASSERT_FALSE(tok) << test::escaped(bad);
    EXPECT_EQ(tok.status().code(), ErrorCode::kCorruptFile) << tok.status().message();
    EXPECT_NE(tok.status().message().find("tokenizer_config.json"), std::string::npos) << tok.status().message();
  }
}

}  // namespace
}  // namespace peregrine
