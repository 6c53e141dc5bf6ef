// Cost of drafting (spec/pld_drafter.h, spec/model_drafter.h) per draft() call on real text:
// prompt lookup on a 2000-token TinyStories context growing by a few tokens per call (the
// incremental n-gram index), and stories260K drafting for itself (chain of 4, tree of 8),
// every call's tokens growing by the accepted draft + one as a verifier would add them.
//
//   build/bin/drafter_bench [--model models/stories260K/stories260K.bin]
//                           [--text ../shared/data/tinystories/tinystories_valid_excerpt.txt]
//                           [--threads N]
// Run from the repository root (the defaults are relative to it).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "peregrine/model/llama_model.h"
#include "peregrine/spec/model_drafter.h"
#include "peregrine/spec/pld_drafter.h"
#include "peregrine/tokenizer/tokenizer.h"

namespace {

using namespace peregrine;

struct Args {
  std::string model = "models/stories260K/stories260K.bin";
  std::string text = "../shared/data/tinystories/tinystories_valid_excerpt.txt";
  int threads = 1;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "drafter_bench: %s\n", what.c_str());
  std::exit(1);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--model") == 0) a.model = argv[i + 1];
    else if (std::strcmp(argv[i], "--text") == 0) a.text = argv[i + 1];
    else if (std::strcmp(argv[i], "--threads") == 0) a.threads = std::atoi(argv[i + 1]);
    else die(std::string("unknown option ") + argv[i]);
  }
  return a;
}

/// Microseconds of `fn` per call over `calls` calls.
double us_per_call(int calls, const std::function<void(int)>& fn) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn(i);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

void check(const Status& st) {
  if (!st.is_ok()) die(st.message());
}

/// Drafts `calls` times for one sequence starting from `tokens`; after each call the tokens
/// grow by the next token of `text`, and first, when `accept` is set, by the draft's first path
/// (all of a chain, the first child at every level of a tree) as if the verifier accepted it.
/// Prints µs per call and the mean nodes drafted.
void bench_calls(const char* name, Drafter& d, std::vector<std::int32_t> tokens, const std::vector<std::int32_t>& text,
                 std::int32_t max_nodes, std::int32_t branching, bool accept, int calls, ThreadPool& pool) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<DraftTree> trees;
  std::int64_t nodes = 0;
  std::size_t next = tokens.size();
  const double us = us_per_call(calls, [&](int) {
    const DraftRequest r{0, tokens, max_nodes, branching, &greedy, nullptr};
    check(d.draft({&r, 1}, trees, pool));
    nodes += trees[0].size();
    for (std::int32_t i = 0, at = -1; accept && i < trees[0].size(); ++i) {
      if (trees[0].nodes[static_cast<std::size_t>(i)].parent != at) continue;
      tokens.push_back(trees[0].nodes[static_cast<std::size_t>(i)].token);
      at = i;
    }
    tokens.push_back(text[next++ % text.size()]);
  });
  std::printf("%-44s %9.1f us/call  %5.2f nodes/call  context %zu → %zu\n", name, us,
              static_cast<double>(nodes) / calls, next - static_cast<std::size_t>(calls), tokens.size());
  d.release(0);
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  ThreadPool pool(args.threads);
  auto file = load_model_file(args.model);
  if (!file) die(file.status().message());
  auto tok = load_tokenizer(*file);
  if (!tok) die(tok.status().message());
  std::ifstream in(args.text);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<std::int32_t> text = (*tok)->encode(ss.str(), true);
  if (text.size() < 2300) die("the text has fewer than 2300 tokens");
  const std::vector<std::int32_t> context(text.begin(), text.begin() + 2000);

  auto pld = PldDrafter::create({1, 3});
  if (!pld) die(pld.status().message());
  bench_calls("pld chain 8, 2000-token context", **pld, context, text, 8, 1, false, 300, pool);
  bench_calls("pld tree 8 (b=3), 2000-token context", **pld, context, text, 8, 3, false, 300, pool);
  const double cold = us_per_call(20, [&](int i) {
    const DraftRequest r{1000 + i, context, 8, 1, nullptr, nullptr};
    std::vector<DraftTree> trees;
    check((*pld)->draft({&r, 1}, trees, pool));
    (*pld)->release(1000 + i);
  });
  std::printf("%-44s %9.1f us/call\n", "pld first call (indexes 2000 tokens)", cold);

  auto model = LlamaModel::create(std::move(*file));
  if (!model) die(model.status().message());
  ModelDrafterOptions o;
  o.kv_blocks = 256;
  auto md = ModelDrafter::create(*model, model->config(), o);
  if (!md) die(md.status().message());
  // Contexts stay below stories260K's 512 positions: 32 + 80 × (4 + 1), 32 + 50 × (8 + 1).
  const std::vector<std::int32_t> prompt(text.begin(), text.begin() + 32);
  bench_calls("stories260K chain k=4 (4 forwards/call)", **md, prompt, text, 4, 1, true, 80, pool);
  bench_calls("stories260K tree 8 nodes (b=2)", **md, prompt, text, 8, 2, true, 50, pool);
  bench_calls("stories260K tree 8 nodes (b=4)", **md, prompt, text, 8, 4, true, 50, pool);
  // Baseline: plain single-token decode forwards over the same range of positions.
  auto cache = KvCache::create(model->config().kv_shape(), {32, kDefaultKvBlockSize, DType::kF32});
  if (!cache) die(cache.status().message());
  std::vector<float> logits;
  Batch prefill;
  for (std::int32_t i = 0; i < 32; ++i) prefill.add(text[static_cast<std::size_t>(i)], i, 0, i == 31);
  check(model->forward(prefill, *cache, logits, pool));
  const double step = us_per_call(400, [&](int i) {
    Batch b;
    b.add(text[static_cast<std::size_t>(32 + i)], 32 + i, 0, true);
    check(model->forward(b, *cache, logits, pool));
  });
  std::printf("%-44s %9.1f us/forward\n", "stories260K one decode forward (positions 32-431)", step);
  return 0;
}
