// `serve --tp 2` / `--pp 2` under mpirun (dist/forward_mirror.h: rank 0's engine schedules, the
// other rank runs every forward on its part of the model): concurrent greedy clients get one
// process's text, streaming included, prefix-cache hits too; SIGTERM stops every rank; a rank killed mid-request ends
// the run, the client gets an error, nothing hangs. A disaggregated prefill / decode pair
// (serve --role) answers as one process too. Skipped without mpirun.
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"
#include "test_paths.h"

namespace peregrine::test {
namespace {

using Json = nlohmann::json;

// One process's greedy completion of `prompt`: `peregrine generate --no-echo [extra]`'s text.
std::string one_process_text(const std::string& prompt, int n, const std::string& extra = "") {
  const std::string out = make_temp_dir() + "/out";
  const std::string cmd = peregrine_binary() + " generate -t 1 --temp 0 --no-echo -n " + std::to_string(n) + " -p '" + prompt +
                          "' " + extra + " > " + out + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::string text = read_file(out);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string completion(const std::string& url, const std::string& prompt, int n, bool stream, const std::string& model = "") {
  httplib::Client client(url);
  client.set_read_timeout(60);
  Json body = {{"prompt", prompt}, {"max_tokens", n}, {"temperature", 0}, {"stream", stream}};
  if (!model.empty()) body["model"] = model;
  auto r = client.Post("/v1/completions", body.dump(), "application/json");
  if (!r || r->status != 200) return "<error>";
  if (!stream) return Json::parse(r->body)["choices"][0]["text"];
  std::string text;  // data: {...} lines until data: [DONE]
  std::istringstream lines(r->body);
  bool done = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    if (line == "data: [DONE]") done = true;
    else text += Json::parse(line.substr(6))["choices"][0]["text"].get<std::string>();
  }
  return done ? text : "<no [DONE]>";
}

// 8 concurrent greedy clients, one streaming, get one process's text; then SIGTERM stops the run.
void expect_answers_like_one_process(ServerProcess& server) {
  ASSERT_TRUE(server.ready()) << server.log();
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Tom"};
  std::vector<std::future<std::string>> replies;
  for (int i = 0; i < 8; ++i) {  // 8 concurrent clients, batched together by rank 0's engine
    replies.push_back(std::async(std::launch::async, completion, server.url(), prompts[i % 2], 48, i == 7, std::string()));
  }
  const std::string want[2] = {one_process_text(prompts[0], 48), one_process_text(prompts[1], 48)};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(replies[static_cast<std::size_t>(i)].get(), want[i % 2]) << "client " << i;
  // SIGTERM: mpirun passes it to every rank; rank 0 drains and stops the others (mpirun's own
  // exit status reports the signal it got, so only the ranks' clean stop is checked).
  EXPECT_NE(server.stop(SIGTERM, 30), -1) << server.log();
  EXPECT_NE(server.log().find("peregrine: server stopped"), std::string::npos) << server.log();
}

void check_serves_like_one_process(const std::vector<std::string>& split) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup.sh)";
  std::vector<std::string> args = {"-t", "1"};
  args.insert(args.end(), split.begin(), split.end());
  ServerProcess server(2, args);
  ASSERT_TRUE(server.ready()) << server.log();
  // The same long prompt twice: the second reuses the first's blocks on every rank (the workers'
  // caches follow rank 0's block tables).
  const std::string prompt = "Once upon a time there was a little girl who wanted to explore the world. She asked her mom";
  const std::string want = one_process_text(prompt, 16);
  EXPECT_EQ(completion(server.url(), prompt, 16, false), want);
  EXPECT_EQ(completion(server.url(), prompt, 16, false), want);
  EXPECT_GT(metric(server, "peregrine_prefix_cache_hit_rate"), 0.3);
  expect_answers_like_one_process(server);
}

TEST(ServeParallel, TensorParallelAnswersAsOneProcess) { check_serves_like_one_process({"--tp", "2"}); }
TEST(ServeParallel, PipelineAnswersAsOneProcess) { check_serves_like_one_process({"--pp", "2"}); }

// serve --role decode beside serve --role prefill (dist/mpi_prefill.h): the prompts' K/V are
// computed by the prefill process and shipped; the decode process's prefix cache spares
// shipping the blocks it holds.
TEST(ServeDisaggregated, APrefillDecodePairAnswersAsOneProcessAndShipsTheKvCache) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup.sh)";
  ServerProcess server({"-t", "1"}, {"-t", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  // stories260K: 5 layers, K and V rows of 32 f32 → 1280 bytes per prompt position.
  constexpr double kPositionBytes = 5 * 2 * 32 * 4;
  const std::string prompt = "Once upon a time there was a little girl who wanted to explore the world. She asked her mom";
  const std::string want = one_process_text(prompt, 16);
  EXPECT_EQ(completion(server.url(), prompt, 16, false), want);
  const double first = metric(server, "peregrine_kv_bytes_shipped_total");
  EXPECT_GT(first, 0);
  EXPECT_EQ(std::fmod(first, kPositionBytes), 0);
  EXPECT_EQ(completion(server.url(), prompt, 16, true), want);  // again, streamed: its full blocks are cached
  const double again = metric(server, "peregrine_kv_bytes_shipped_total") - first;
  EXPECT_GE(again, 0);
  EXPECT_LE(again, first - 16 * kPositionBytes) << "a prefix-cache hit still shipped its blocks";
  expect_answers_like_one_process(server);
}

TEST(ServeDisaggregated, RolesThatDoNotPairUpAreOneClearError) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup.sh)";
  ServerProcess two_decoders(2, {"-t", "1", "--role", "decode"});
  EXPECT_FALSE(two_decoders.ready());
  EXPECT_NE(two_decoders.log().find("one of each role"), std::string::npos) << two_decoders.log();
  ServerProcess alone({"-t", "1", "--role", "prefill"});
  EXPECT_FALSE(alone.ready());
  EXPECT_NE(alone.log().find("runs as two MPI ranks"), std::string::npos) << alone.log();
}

// Two LoRA adapters in one slot (--max-loras 1) under --tp 2: each request's adapter is loaded,
// cut for each rank, into the slot rank 0's pool chose, and the text is one process's with it.
TEST(ServeParallel, LoraAdaptersLoadOnDemandOnEveryRank) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup.sh)";
  const std::string a = testdata_dir() + "/lora-42.gguf", b = testdata_dir() + "/lora-41";
  ServerProcess server(2, {"-t", "1", "--tp", "2", "--lora", "a=" + a, "--lora", "b=" + b, "--max-loras", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string prompt = "Once upon a time";
  const std::string want_a = one_process_text(prompt, 24, "--lora " + a), want_b = one_process_text(prompt, 24, "--lora " + b);
  ASSERT_NE(want_a, want_b);
  for (const char* name : {"a", "b", "a", "b"}) {
    EXPECT_EQ(completion(server.url(), prompt, 24, false, name), name[0] == 'a' ? want_a : want_b) << name;
  }
  EXPECT_EQ(completion(server.url(), prompt, 24, false), one_process_text(prompt, 24));  // the base
  EXPECT_GE(metric(server, "peregrine_lora_evictions_total"), 3);
}

TEST(ServeParallel, ARankKilledMidRequestFailsTheClientWithoutAHang) {
  if (mpirun_path().empty()) GTEST_SKIP() << "mpirun not found: install openmpi-bin (scripts/setup.sh)";
  ServerProcess server(2, {"-t", "1", "--tp", "2", "--ctx", "512"});
  ASSERT_TRUE(server.ready()) << server.log();
  const auto started = std::chrono::steady_clock::now();
  // Clients send long streamed requests (ignore_eos, 500 tokens) one after another until one
  // fails; rank 1 is killed while they run.
  auto failure = std::async(std::launch::async, [&] {
    httplib::Client client(server.url());
    client.set_read_timeout(60);
    const Json body = {{"prompt", "Once upon a time"}, {"max_tokens", 500}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}};
    while (std::chrono::steady_clock::now() - started < std::chrono::seconds(60)) {
      auto r = client.Post("/v1/completions", body.dump(), "application/json");
      if (!r) return std::string("no response: ") + httplib::to_string(r.error());
      if (r->body.find("data: [DONE]") == std::string::npos) return std::string("a stream cut short");
    }
    return std::string();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::vector<pid_t> ranks = child_pids(server.pid());
  ASSERT_EQ(ranks.size(), 2u);
  ::kill(ranks.back(), SIGKILL);
  ASSERT_EQ(failure.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "a client still waits 60 s on";
  const std::string how = failure.get();
  EXPECT_FALSE(how.empty()) << "every request completed although a rank died";
  std::printf("[ serve --tp 2 ] rank 1 killed: the client saw %s\n", how.c_str());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(60));
  // mpirun ends the run by itself (it stops rank 0, which may still be draining when the client
  // saw its error): signal 0 only waits for it.
  const int mpirun_status = server.stop(0, 30);
  EXPECT_NE(mpirun_status, -1) << "mpirun still running 30 s after a rank was killed\n" << server.log();
  EXPECT_NE(mpirun_status, 0);
  // A rank may still be exiting when mpirun has returned (the sanitizers' leak check runs at
  // exit): none may be left running 10 s on.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const auto any_running = [&] { return std::any_of(ranks.begin(), ranks.end(), process_running); };
  while (any_running() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (pid_t pid : ranks) EXPECT_FALSE(process_running(pid)) << "rank process " << pid << " still running 10 s after mpirun ended";
}

}  // namespace
}  // namespace peregrine::test
