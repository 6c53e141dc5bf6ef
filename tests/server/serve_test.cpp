// End to end: `peregrine serve` on stories260K driven over HTTP (cpp-httplib's client and raw
// sockets), greedy so every text is reproducible.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <future>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "peregrine/server/sse_reader.h"
#include "peregrine/model/lora_adapter.h"
#include "peregrine/tokenizer/llama2c_tokenizer.h"
#include "server_process.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;
using test::ServerProcess;

struct Reply {
  int status = 0;  // 0: no response (connection failed)
  Json body;
};

struct Streamed {
  int status = 0;
  std::string text;
  std::string finish_reason;
  bool done = false;        // reached data: [DONE]
  bool error_event = false;  // an {"error": ...} event came instead of a finish_reason
  int text_chunks = 0;
  std::string transport_error;  // httplib's error when no response came
};

httplib::Headers auth(const std::string& key) {
  return key.empty() ? httplib::Headers{} : httplib::Headers{{"Authorization", "Bearer " + key}};
}

Reply post_raw(const ServerProcess& s, const std::string& path, const std::string& body, const std::string& key = "") {
  httplib::Client client(s.url());
  client.set_read_timeout(120);
  auto r = client.Post(path.c_str(), auth(key), body, "application/json");
  if (!r) return {};
  return {r->status, Json::parse(r->body, nullptr, false)};
}

Reply post(const ServerProcess& s, const std::string& path, const Json& body, const std::string& key = "") {
  return post_raw(s, path, body.dump(), key);
}

Reply get(const ServerProcess& s, const std::string& path, const std::string& key = "") {
  httplib::Client client(s.url());
  auto r = client.Get(path.c_str(), auth(key));
  if (!r) return {};
  return {r->status, Json::parse(r->body, nullptr, false)};
}

/// Streams a completion; `on_chunk` (optional) sees each text chunk as it arrives.
Streamed stream(const ServerProcess& s, Json body, const std::function<void(int)>& on_chunk = {}) {
  body["stream"] = true;
  Streamed out;
  SseReader reader;
  httplib::Client client(s.url());
  client.set_read_timeout(120);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
    for (const std::string& e : reader.feed({data, len})) {
      EXPECT_FALSE(out.done) << "event after [DONE]";
      if (e == "[DONE]") {
        out.done = true;
        continue;
      }
      const Json chunk = Json::parse(e);
      if (chunk.contains("error")) {
        out.error_event = true;
        continue;
      }
      const Json& choice = chunk["choices"][0];
      if (!choice["finish_reason"].is_null()) out.finish_reason = choice["finish_reason"];
      const std::string text = choice["text"];
      if (text.empty()) continue;
      out.text += text;
      if (on_chunk) on_chunk(++out.text_chunks);
    }
    return true;
  };
  const httplib::Result result = client.send(req);
  if (!result) out.transport_error = httplib::to_string(result.error());
  return out;
}

/// The value of an unlabelled (or exactly labelled) sample in /metrics; -1 if absent.
/// Distinct openings of real TinyStories sentences (the first five words of each).
std::vector<std::string> story_openings(std::size_t n) {
  const std::string text = test::read_file(test::shared_dir() + "/data/tinystories/tinystories_valid_excerpt.txt");
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::istringstream sentences(text);
  for (std::string sentence; out.size() < n && std::getline(sentences, sentence, '.');) {
    std::istringstream words(sentence);
    std::string opening, w;
    for (int k = 0; k < 5 && words >> w; ++k) opening += (opening.empty() ? "" : " ") + w;
    if (opening.find(' ') != std::string::npos && seen.insert(opening).second) out.push_back(opening);
  }
  return out;
}

Json greedy(const std::string& prompt, int max_tokens) {
  return {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

class ServeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess({"--parallel", "32", "--ctx", "512"}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->log(); }
  static ServerProcess* server_;
};
ServerProcess* ServeTest::server_ = nullptr;

TEST_F(ServeTest, HealthModelsAndMetrics) {
  EXPECT_EQ(get(*server_, "/health").body, Json::parse(R"({"status": "ok"})"));
  const Reply models = get(*server_, "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.body["object"], "list");
  ASSERT_EQ(models.body["data"].size(), 1u);
  EXPECT_EQ(models.body["data"][0]["id"], "stories260K");
  EXPECT_EQ(models.body["data"][0]["object"], "model");
  httplib::Client client(server_->url());
  auto m = client.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(m->body.find("# TYPE peregrine_kv_blocks_free gauge"), std::string::npos);
  EXPECT_GT(metric(*server_, "peregrine_kv_blocks_total"), 0);
}

TEST_F(ServeTest, GreedyCompletionMatchesTheReferenceText) {
  // llama2.c's greedy stories260K continuation of "Once upon a time" (its first words).
  const std::string reference = test::read_file(test::shared_dir() + "/models/stories260K/greedy_once_upon_a_time.txt");
  const Reply r = post(*server_, "/v1/completions", greedy("Once upon a time", 40));
  ASSERT_EQ(r.status, 200) << r.body.dump();
  const std::string text = r.body["choices"][0]["text"];
  EXPECT_EQ(reference.rfind("Once upon a time" + text, 0), 0u) << text;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 40);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r.body["object"], "text_completion");
}

// llama-server's /tokenize and /detokenize answer with the served model's vocabulary (the
// fields' rules: tokenize_endpoints_test.cpp).
TEST_F(ServeTest, TokenizeAndDetokenizeRoutes) {
  const Reply ids = post(*server_, "/tokenize", {{"content", "Once upon a time"}, {"add_special", true}});
  ASSERT_EQ(ids.status, 200) << ids.body.dump();
  ASSERT_GT(ids.body["tokens"].size(), 2u);
  EXPECT_EQ(ids.body["tokens"][0], 1);  // stories260K's BOS
  const Reply text = post(*server_, "/detokenize", {{"tokens", ids.body["tokens"]}});
  ASSERT_EQ(text.status, 200) << text.body.dump();
  EXPECT_EQ(text.body["content"], "Once upon a time");
  const Reply bad = post(*server_, "/detokenize", {{"tokens", {1, 512}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "tokens");
}

// logit_bias and the penalties reach the sampler: +20 on one token makes the greedy text that
// token repeated; a frequency penalty of 2 over the whole context (repeat_last_n -1) takes 2 off
// per occurrence, so the same bias stops winning after a few repeats; a logit_bias id past the
// vocabulary is a 400 naming the field.
TEST_F(ServeTest, LogitBiasAndFrequencyPenaltyShapeTheGreedyText) {
  auto tokenizer = load_llama2c_tokenizer(test::shared_dir() + "/models/stories260K/tok512.bin");
  ASSERT_TRUE(tokenizer) << tokenizer.status().message();
  const std::vector<std::int32_t> ids = (*tokenizer)->encode(" dog", false);
  ASSERT_FALSE(ids.empty());
  const std::int32_t dog = ids.back();
  const std::string piece = (*tokenizer)->decode(std::vector<std::int32_t>{dog});
  std::string repeated;
  for (int i = 0; i < 24; ++i) repeated += piece;
  Json biased = greedy("Once upon a time", 24);
  biased["logit_bias"] = {{std::to_string(dog), 20}};
  const Reply r = post(*server_, "/v1/completions", biased);
  ASSERT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["choices"][0]["text"], repeated);
  biased["frequency_penalty"] = 2;
  biased["repeat_last_n"] = -1;
  const Reply penalized = post(*server_, "/v1/completions", biased);
  ASSERT_EQ(penalized.status, 200) << penalized.body.dump();
  const std::string text = penalized.body["choices"][0]["text"];
  EXPECT_EQ(text.rfind(piece + piece, 0), 0u) << text;  // the bias still wins at first
  EXPECT_NE(text, repeated);
  biased["logit_bias"] = Json::array({Json::array({512, 1})});
  const Reply bad = post(*server_, "/v1/completions", biased);
  EXPECT_EQ(bad.status, 400) << bad.body.dump();
  EXPECT_EQ(bad.body["error"]["param"], "logit_bias");
}

// The per-request "speculative" field: prompt lookup and (with `serve --spec layerskip`) the
// server's drafter give the plain greedy text; the acceptance counters reach /metrics; a
// method the server has no drafter for is a 400 naming the field.
TEST(ServeSpeculative, PerRequestMethodsKeepTheGreedyTextAndReachMetrics) {
  ServerProcess server({"--spec", "layerskip", "--draft-layers", "3", "--draft-max", "3"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::string reference = test::read_file(test::shared_dir() + "/models/stories260K/greedy_once_upon_a_time.txt");
  for (const Json& spec : {Json("none"), Json("pld"), Json::parse(R"({"method": "pld", "draft_max": 8, "adaptive": true})"),
                           Json("layerskip"), Json::parse(R"({"branching": 2, "draft_max": 6})")}) {
    Json body = greedy("Once upon a time", 120);
    body["speculative"] = spec;
    const Reply r = post(server, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.body.dump();
    const std::string text = r.body["choices"][0]["text"];
    EXPECT_EQ(reference.rfind("Once upon a time" + text, 0), 0u) << spec.dump() << ": " << text;
  }
  EXPECT_GT(metric(server, "peregrine_spec_draft_tokens_total"), 0);
  EXPECT_GT(metric(server, "peregrine_spec_accepted_tokens_total"), 0);
  EXPECT_GT(metric(server, "peregrine_spec_verify_steps_total"), 0);
  Json bad = greedy("Once upon a time", 4);
  bad["speculative"] = "draft";
  const Reply r = post(server, "/v1/completions", bad);
  EXPECT_EQ(r.status, 400) << r.body.dump();
  EXPECT_EQ(r.body["error"]["param"], "speculative");
}

TEST_F(ServeTest, ConcurrentStreamsEqualTheSameRequestsAlone) {
  const std::vector<std::string> prompts = story_openings(32);
  ASSERT_EQ(prompts.size(), 32u);
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    const Streamed s = stream(*server_, greedy(p, 48));
    ASSERT_TRUE(s.done) << p;
    alone.push_back(s.text);
  }
  std::vector<std::future<Streamed>> together;
  for (const auto& p : prompts) {
    together.push_back(std::async(std::launch::async, [&, p] { return stream(*server_, greedy(p, 48)); }));
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Streamed s = together[i].get();
    EXPECT_EQ(s.status, 200) << s.transport_error;
    EXPECT_TRUE(s.done);
    EXPECT_FALSE(s.finish_reason.empty());
    EXPECT_EQ(s.text, alone[i]) << "prompt " << i << ": " << prompts[i];
  }
}

/// Opens a raw connection, sends a streaming request, reads until `chunks` SSE events came,
/// then closes the socket.
void stream_then_hang_up(int port, const std::string& body, int chunks) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string received;
  char buf[4096];
  std::size_t events = 0;
  while (events < static_cast<std::size_t>(chunks)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << "the server closed first: " << received;
    received.append(buf, static_cast<std::size_t>(n));
    events = 0;
    for (std::size_t at = received.find("data: "); at != std::string::npos; at = received.find("data: ", at + 1)) ++events;
  }
  ::close(fd);
}

TEST_F(ServeTest, ClientDisconnectCancelsAndFreesItsBlocks) {
  const double free_before = metric(*server_, "peregrine_kv_blocks_free");
  const double cancelled_before = std::max(0.0, metric(*server_, "peregrine_requests_total{status=\"cancelled\"}"));
  ASSERT_GT(free_before, 0);
  Json body = greedy("Once upon a time", 500);
  body["stream"] = true;
  body["ignore_eos"] = true;
  stream_then_hang_up(server_->port(), body.dump(), 3);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  double free_now = -1, running = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    free_now = metric(*server_, "peregrine_kv_blocks_free");
    running = metric(*server_, "peregrine_requests_running");
    if (free_now == free_before && running == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(free_now, free_before);
  EXPECT_EQ(running, 0);
  EXPECT_EQ(metric(*server_, "peregrine_requests_total{status=\"cancelled\"}"), cancelled_before + 1)
      << "the request ended by itself instead of being cancelled";
}

TEST_F(ServeTest, BadRequestsAre400WithTheParamAndUnknownRouteIs404) {
  struct Case {
    std::string path, body;
    int status;
    const char* param;
  };
  const Case cases[] = {
      {"/v1/completions", R"({"prompt": "x", )", 400, nullptr},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "ten"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "temperature": 5})", 400, "temperature"},
      {"/v1/completions", R"({"prompt": [1, 100000]})", 400, "prompt"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "hi"}]})", 400, "messages[0].role"},
      {"/v1/nothing", R"({})", 404, nullptr},
  };
  for (const auto& c : cases) {
    const Reply r = post_raw(*server_, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " → " << r.body.dump();
    ASSERT_TRUE(r.body.contains("error")) << r.body.dump();
    const Json& e = r.body["error"];
    for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(e.contains(key)) << key;
    if (c.param != nullptr) {
      EXPECT_EQ(e["param"], c.param) << c.body;
    }
  }
  // Without LoRA adapters any model name is the served model (404 only among adapters: LoRA tests).
  EXPECT_EQ(post_raw(*server_, "/v1/completions", R"({"prompt": "x", "model": "gpt-4", "max_tokens": 1})").status, 200);
  EXPECT_EQ(get(*server_, "/v2/unknown").status, 404);
  const Reply big = post_raw(*server_, "/v1/completions", "{\"prompt\": \"" + std::string(9u << 20, 'a') + "\"}");
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(big.body["error"]["type"], "invalid_request_error");
}

// Two LoRA adapters (random-weight PEFT folders) served beside the base: a request picks one by
// "model", /v1/models lists them with the base as parent, concurrent requests of the adapters
// and the base give each the text it gets alone, and an unknown name is 404.
/// Two random adapters saved as PEFT folders in a new temporary folder: DIR/lora1, DIR/lora2.
std::string save_two_adapters() {
  auto base = test::load_stories260k();
  EXPECT_TRUE(base);
  const std::string dir = test::make_temp_dir();
  const std::vector<std::string> all = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
  for (std::uint32_t seed : {1u, 2u}) {
    const LoraAdapter a = test::random_lora_adapter(base->file(), 4, 8.0f, seed, all, 0.1f);
    EXPECT_TRUE(save_peft_adapter(a, dir + "/lora" + std::to_string(seed), "stories260K").is_ok());
  }
  return dir;
}

/// The greedy completion of "Once upon a time" by `model` (empty: the base).
std::string lora_text(ServerProcess& server, const std::string& model) {
  Json body = greedy("Once upon a time", 48);
  if (!model.empty()) body["model"] = model;
  const Reply r = post(server, "/v1/completions", body);
  EXPECT_EQ(r.status, 200) << r.body.dump();
  if (!model.empty()) {
    EXPECT_EQ(r.body["model"], model);
  }
  return r.status == 200 ? r.body["choices"][0]["text"].get<std::string>() : std::string();
}

/// Each adapter's text alone equals its text among concurrent requests of the others.
void expect_same_text_alone_and_together(ServerProcess& server) {
  const std::vector<std::string> names = {"", "poet", "critic", "poet"};
  std::vector<std::string> alone;
  for (const std::string& n : names) alone.push_back(lora_text(server, n));
  EXPECT_NE(alone[1], alone[0]);
  EXPECT_NE(alone[2], alone[1]);
  std::vector<std::future<std::string>> together;
  for (const std::string& n : names) together.push_back(std::async(std::launch::async, lora_text, std::ref(server), n));
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << names[i];
}

TEST(ServeLora, RequestsPickAdaptersByModelNameAndMixInOneBatch) {
  const std::string dir = save_two_adapters();
  ServerProcess server({"--parallel", "4", "--lora", "poet=" + dir + "/lora1", "--lora", "critic=" + dir + "/lora2:0.5"});
  ASSERT_TRUE(server.ready()) << server.log();
  const Reply models = get(server, "/v1/models");
  ASSERT_EQ(models.status, 200);
  ASSERT_EQ(models.body["data"].size(), 3u);
  EXPECT_EQ(models.body["data"][1]["id"], "poet");
  EXPECT_EQ(models.body["data"][2]["parent"], models.body["data"][0]["id"]);
  expect_same_text_alone_and_together(server);
  Json unknown = greedy("Once upon a time", 4);
  unknown["model"] = "painter";
  EXPECT_EQ(post(server, "/v1/completions", unknown).status, 404);
}

TEST(ServeLora, MaxLorasLoadsAdaptersOnDemand) {
  const std::string dir = save_two_adapters();
  ServerProcess server({"--parallel", "4", "--max-loras", "1", "--lora", "poet=" + dir + "/lora1", "--lora",
                        "critic=" + dir + "/lora2:0.5"});
  ASSERT_TRUE(server.ready()) << server.log();
  expect_same_text_alone_and_together(server);
  // An adapter that can no longer be read ends its request with a server error; the server
  // goes on serving. A critic request alone first makes critic the one resident adapter, so
  // poet must be read from disk again.
  EXPECT_FALSE(lora_text(server, "critic").empty());
  std::filesystem::remove_all(dir + "/lora1");
  std::filesystem::remove_all(dir + "/lora2");
  Json body = greedy("Once upon a time", 8);
  body["model"] = "poet";
  const Reply gone = post(server, "/v1/completions", body);
  EXPECT_EQ(gone.status, 500) << gone.body.dump();
  EXPECT_NE(gone.body["error"]["message"].get<std::string>().find("lora1"), std::string::npos) << gone.body.dump();
  EXPECT_FALSE(lora_text(server, "critic").empty());
  EXPECT_FALSE(lora_text(server, "").empty());
  // Startup loads both once (poet evicted for critic); serving poet and critic in turns evicts more.
  EXPECT_EQ(metric(server, "peregrine_lora_adapters_resident"), 1);
  EXPECT_GE(metric(server, "peregrine_lora_loads_total"), 4);
  EXPECT_GE(metric(server, "peregrine_lora_evictions_total"), 3);
}

TEST(ServeLora, BadMaxLorasIsAClearError) {
  const std::string dir = save_two_adapters();
  ServerProcess server({"--max-loras", "-1", "--lora", "poet=" + dir + "/lora1"});
  EXPECT_FALSE(server.ready());
  EXPECT_NE(server.log().find("--max-loras"), std::string::npos) << server.log();
}

TEST(ServeLimits, PromptLongerThanTheContextIs400AndAFullContextEndsWithLength) {
  ServerProcess server({"--ctx", "64"});
  ASSERT_TRUE(server.ready()) << server.log();
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "Once upon a time. ";
  const Reply r = post(server, "/v1/completions", greedy(prompt, 4));
  EXPECT_EQ(r.status, 400) << r.body.dump();
  EXPECT_EQ(r.body["error"]["param"], "prompt");
  EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded");
  const std::string message = r.body["error"]["message"];
  EXPECT_NE(message.find("exceeds the available context size"), std::string::npos) << message;  // llama-server's words
  EXPECT_EQ(post(server, "/v1/completions", greedy("Once", 65)).body["error"]["param"], "max_tokens");
  EXPECT_EQ(post(server, "/v1/completions", greedy("Once", 8)).status, 200);
  // A generation that reaches the context ends there, with finish_reason "length": the last
  // token is sampled from position 63's logits.
  Json full = greedy("Once", 64);
  full["ignore_eos"] = true;
  const Reply ended = post(server, "/v1/completions", full);
  ASSERT_EQ(ended.status, 200) << ended.body.dump();
  EXPECT_EQ(ended.body["choices"][0]["finish_reason"], "length");
  const int prompt_tokens = ended.body["usage"]["prompt_tokens"], completion_tokens = ended.body["usage"]["completion_tokens"];
  EXPECT_EQ(prompt_tokens + completion_tokens, 65) << ended.body.dump();
  EXPECT_LT(completion_tokens, 64);
}

TEST(ServeAuth, ApiKeyIsRequiredExceptForHealth) {
  ServerProcess server({"--api-key", "sekret"});
  ASSERT_TRUE(server.ready()) << server.log();
  const Json body = greedy("Once upon a time", 4);
  const Reply none = post(server, "/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body["error"]["type"], "authentication_error");
  EXPECT_EQ(post(server, "/v1/completions", body, "wrong").status, 401);
  EXPECT_EQ(get(server, "/v1/models").status, 401);
  EXPECT_EQ(post(server, "/v1/completions", body, "sekret").status, 200);
  EXPECT_EQ(get(server, "/v1/models", "sekret").status, 200);
  EXPECT_EQ(get(server, "/health").status, 200);
}

// Anthropic clients send the key as x-api-key and get Anthropic's error shape; a browser's CORS
// preflight needs no key, and a response to a page names its origin as allowed.
TEST(ServeAuth, AnthropicKeyHeaderAndCrossOriginRequests) {
  ServerProcess server({"--api-key", "sekret"});
  ASSERT_TRUE(server.ready()) << server.log();
  httplib::Client c("127.0.0.1", server.port());
  const std::string body = R"({"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]})";
  auto denied = c.Post("/v1/messages", body, "application/json");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(Json::parse(denied->body), Json::parse(R"({"type": "error", "error": {"type": "authentication_error",
      "message": "Incorrect or missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"}})"));
  auto ok = c.Post("/v1/messages", {{"x-api-key", "sekret"}, {"Origin", "http://localhost:3000"}}, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  EXPECT_EQ(Json::parse(ok->body)["type"], "message");
  EXPECT_EQ(ok->get_header_value("Access-Control-Allow-Origin"), "http://localhost:3000");
  auto preflight = c.Options("/v1/chat/completions", {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"},
                                                      {"Access-Control-Request-Headers", "Authorization"}});
  ASSERT_TRUE(preflight);
  EXPECT_EQ(preflight->status, 200);
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Methods"), "GET, POST, DELETE, OPTIONS");
  EXPECT_EQ(preflight->get_header_value("Access-Control-Allow-Headers"), "*");
}

TEST(ServeOverload, QueueFullIs429AndAcceptedRequestsComplete) {
  ServerProcess server({"--parallel", "1", "--max-queue", "1"});
  ASSERT_TRUE(server.ready()) << server.log();
  const std::vector<std::string> prompts = story_openings(6);
  std::vector<std::future<Reply>> replies;
  for (const auto& prompt : prompts) {
    Json body = greedy(prompt, 300);
    body["ignore_eos"] = true;
    replies.push_back(std::async(std::launch::async, [&server, body] { return post(server, "/v1/completions", body); }));
  }
  int rejected = 0, completed = 0;
  for (auto& f : replies) {
    const Reply r = f.get();
    if (r.status == 429) {
      ++rejected;
      EXPECT_EQ(r.body["error"]["type"], "rate_limit_error");
      for (const char* key : {"message", "type", "param", "code"}) EXPECT_TRUE(r.body["error"].contains(key));
    } else {
      EXPECT_EQ(r.status, 200) << r.body.dump();
      EXPECT_EQ(r.body["usage"]["completion_tokens"], 300);
      ++completed;
    }
  }
  EXPECT_GE(rejected, 1);
  EXPECT_GE(completed, 1);
}

TEST(ServeShutdown, SigtermFinishesTheRequestInFlightAndExitsZero) {
  ServerProcess server({});
  ASSERT_TRUE(server.ready()) << server.log();
  Json body = greedy("Once upon a time", 400);
  body["ignore_eos"] = true;
  std::promise<void> first_chunk;
  auto streamed = std::async(std::launch::async, [&] {
    return stream(server, body, [&](int n) {
      if (n == 1) first_chunk.set_value();
    });
  });
  ASSERT_EQ(first_chunk.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  auto exit_code = std::async(std::launch::async, [&] { return server.stop(SIGTERM, 60); });
  const Streamed s = streamed.get();
  EXPECT_EQ(s.status, 200);
  EXPECT_TRUE(s.done) << "the stream was cut";
  EXPECT_TRUE(s.finish_reason == "length" || s.error_event) << s.finish_reason;
  EXPECT_EQ(exit_code.get(), 0) << server.log();
  EXPECT_EQ(post(server, "/v1/completions", greedy("Once", 4)).status, 0) << "still serving after SIGTERM";
}

TEST(ServeCli, BadOptionsGiveOneErrorLine) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--kv-type", "f64"}, "f64"},
      {{"--kv-memory", "12Q"}, "--kv-memory"},
      {{"--kv-memory", "100"}, "smaller than one KV block"},
      {{"--block-size", "0"}, "--block-size"},
      {{"--chat-template", "no-such-template"}, "no-such-template"},
      {{"-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf"},
  };
  for (const auto& [args, needle] : cases) {
    ServerProcess server(args);
    EXPECT_FALSE(server.ready());
    const std::string log = server.log();
    EXPECT_EQ(log.rfind("peregrine: error: ", 0), 0u) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    EXPECT_NE(log.find(needle), std::string::npos) << log;
  }
}

}  // namespace
}  // namespace peregrine
