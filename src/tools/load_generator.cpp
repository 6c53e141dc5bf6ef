#include "peregrine/tools/load_generator.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <numeric>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "peregrine/server/sse_reader.h"

namespace peregrine {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

/// What one request measured.
struct Sample {
  std::string error;  // "" = succeeded
  std::int64_t prompt_tokens = 0;
  std::int64_t output_tokens = 0;
  std::int64_t text_chunks = 0;  // streaming only: chunks with text, counted whether or not the stream completes
  double e2e_ms = 0;
  double ttft_ms = -1;  // streaming only
  std::vector<double> itl_ms;
};

/// Reads the streamed chunks of one response as they arrive.
class StreamTimer {
 public:
  explicit StreamTimer(Clock::time_point start) : start_(start), last_(start) {}

  void feed(std::string_view bytes, Sample& s) {
    for (const std::string& data : reader_.feed(bytes)) {
      if (data == "[DONE]") continue;
      const Json chunk = Json::parse(data, nullptr, /*allow_exceptions=*/false);
      if (!chunk.is_object() || chunk.contains("error")) {
        s.error = chunk.is_object() ? "stream_error" : "bad_response";
        continue;
      }
      if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) read_usage(*usage, s);
      if (!has_text(chunk)) continue;
      ++s.text_chunks;
      const auto now = Clock::now();
      if (s.ttft_ms < 0) {
        s.ttft_ms = ms_since(start_, now);
      } else {
        s.itl_ms.push_back(ms_since(last_, now));
      }
      last_ = now;
    }
  }

  /// Whether a completions chunk carries text (the role-only, finish and usage chunks do not).
  static bool has_text(const Json& chunk) {
    auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return false;
    auto text = (*choices)[0].find("text");
    return text != (*choices)[0].end() && text->is_string() && !text->get_ref<const std::string&>().empty();
  }

  static void read_usage(const Json& usage, Sample& s) {
    auto count = [&](const char* key) {
      auto it = usage.find(key);
      return it != usage.end() && it->is_number_integer() ? it->get<std::int64_t>() : std::int64_t{0};
    };
    s.prompt_tokens = count("prompt_tokens");
    s.output_tokens = count("completion_tokens");
  }

 private:
  SseReader reader_;
  Clock::time_point start_, last_;
};

std::string request_body(const LoadOptions& o, const std::string& prompt, const std::string* model) {
  Json body = {{"prompt", prompt}, {"max_tokens", o.max_tokens}, {"temperature", 0}, {"ignore_eos", true},
               {"stream", o.stream}};
  if (model != nullptr) body["model"] = *model;
  if (o.stream) body["stream_options"] = {{"include_usage", true}};
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Sample failed(std::string kind) {
  Sample s;
  s.error = std::move(kind);
  return s;
}

Sample send_one(httplib::Client& client, const LoadOptions& o, const std::string& prompt, const std::string* model) {
  Sample s;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = request_body(o, prompt, model);
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  const auto start = Clock::now();
  StreamTimer timer(start);
  std::string body;
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, std::size_t len, std::uint64_t, std::uint64_t) {
    if (o.stream && status == 200) {
      timer.feed({data, len}, s);
    } else {
      body.append(data, len);
    }
    return true;
  };
  const httplib::Result result = client.send(req);
  s.e2e_ms = ms_since(start, Clock::now());
  if (!result) return failed("connection_" + httplib::to_string(result.error()));
  if (status != 200) return failed("http_" + std::to_string(status));
  if (o.stream) return s;
  const Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("usage") || !j["usage"].is_object()) return failed("bad_response");
  StreamTimer::read_usage(j["usage"], s);
  return s;
}

Percentiles percentiles(const std::vector<double>& v) { return {quantile(v, 0.5), quantile(v, 0.9), quantile(v, 0.99)}; }

LoadReport summarize(const LoadOptions& o, const std::vector<Sample>& samples, double wall_s) {
  LoadReport r;
  r.requests = o.requests;
  r.concurrency = o.concurrency;
  r.wall_s = wall_s;
  std::vector<double> ttft, itl, e2e;
  for (const Sample& s : samples) {
    r.streamed_chunks += s.text_chunks;
    if (!s.error.empty()) {
      ++r.errors[s.error];
      continue;
    }
    ++r.succeeded;
    r.prompt_tokens += s.prompt_tokens;
    r.output_tokens += s.output_tokens;
    e2e.push_back(s.e2e_ms);
    if (s.ttft_ms >= 0) ttft.push_back(s.ttft_ms);
    itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
  }
  r.req_per_s = wall_s > 0 ? r.succeeded / wall_s : 0;
  r.output_tps = wall_s > 0 ? static_cast<double>(r.output_tokens) / wall_s : 0;
  r.streamed_cps = wall_s > 0 ? static_cast<double>(r.streamed_chunks) / wall_s : 0;
  r.ttft_ms = percentiles(ttft);
  r.itl_ms = percentiles(itl);
  r.e2e_ms = percentiles(e2e);
  return r;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;) words.push_back(std::move(w));
  return words;
}

/// The most words from `words` starting at `offset` (wrapping) that, appended to `head`, keep
/// the token count at or below `budget` (at least one word).
std::string fill_to(const std::string& head, const std::vector<std::string>& words, std::size_t offset,
                    std::int32_t budget, const Tokenizer& tok) {
  auto text_of = [&](std::size_t n) {
    std::string t = head;
    for (std::size_t k = 0; k < n; ++k) (t += t.empty() ? "" : " ") += words[(offset + k) % words.size()];
    return t;
  };
  std::size_t lo = 1, hi = static_cast<std::size_t>(budget) + 1;  // a word is at least one token
  while (lo < hi) {
    const std::size_t mid = (lo + hi + 1) / 2;
    const auto n_tokens = static_cast<std::int64_t>(tok.encode(text_of(mid), tok.add_bos_default()).size());
    if (n_tokens <= budget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return text_of(lo);
}

}  // namespace

double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const double pos = q * static_cast<double>(samples.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  if (i + 1 >= samples.size()) return samples.back();
  return samples[i] + (pos - static_cast<double>(i)) * (samples[i + 1] - samples[i]);
}

Json LoadReport::to_json() const {
  auto p = [](const Percentiles& x) { return Json{{"p50", x.p50}, {"p90", x.p90}, {"p99", x.p99}}; };
  return {{"requests", requests},   {"concurrency", concurrency},  {"succeeded", succeeded},
          {"errors", Json(errors)}, {"wall_s", wall_s},            {"req_per_s", req_per_s},
          {"output_tps", output_tps}, {"prompt_tokens", prompt_tokens}, {"output_tokens", output_tokens},
          {"streamed_chunks", streamed_chunks}, {"streamed_cps", streamed_cps},
          {"ttft_ms", p(ttft_ms)},  {"itl_ms", p(itl_ms)},         {"e2e_ms", p(e2e_ms)}};
}

Expected<LoadReport> run_load(const LoadOptions& o, std::span<const std::string> prompts) {
  if (o.concurrency < 1 || o.requests < 1) return invalid_argument("concurrency and requests must be >= 1");
  if (prompts.empty()) return invalid_argument("no prompts");
  for (const std::string& m : o.models) {
    if (m.empty()) return invalid_argument("an empty model name");
  }
  static const std::regex kUrl(R"(https?://[^\s/:?#]+(:[0-9]{1,5})?)");
  if (!std::regex_match(o.url, kUrl) || !httplib::Client(o.url).is_valid()) {
    return invalid_argument("cannot use the URL '" + o.url + "' (want http://HOST:PORT)");
  }
  std::vector<Sample> samples(static_cast<std::size_t>(o.requests));
  std::atomic<std::int32_t> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (std::int32_t c = 0; c < o.concurrency; ++c) {
    threads.emplace_back([&] {
      httplib::Client client(o.url);
      client.set_read_timeout(600);
      for (std::int32_t i; (i = next.fetch_add(1)) < o.requests;) {
        const std::string* model = o.models.empty() ? nullptr : &o.models[static_cast<std::size_t>(i) % o.models.size()];
        samples[static_cast<std::size_t>(i)] =
            send_one(client, o, prompts[static_cast<std::size_t>(i) % prompts.size()], model);
      }
    });
  }
  for (auto& t : threads) t.join();
  return summarize(o, samples, std::chrono::duration<double>(Clock::now() - start).count());
}

Expected<std::vector<std::string>> build_prompts(std::string_view text, const Tokenizer& tokenizer, std::int32_t n,
                                                 std::int32_t prompt_len, std::int32_t shared_prefix,
                                                 std::uint64_t seed) {
  const std::vector<std::string> words = split_words(text);
  if (words.empty()) return invalid_argument("the prompt text has no words");
  if (prompt_len < 1 || shared_prefix < 0 || shared_prefix > prompt_len) {
    return invalid_argument("want prompt_len >= 1 and 0 <= shared_prefix <= prompt_len");
  }
  const std::string prefix = shared_prefix > 0 ? fill_to("", words, 0, shared_prefix, tokenizer) : "";
  std::vector<std::size_t> offsets(words.size());
  std::iota(offsets.begin(), offsets.end(), std::size_t{0});
  std::shuffle(offsets.begin(), offsets.end(), std::mt19937_64(seed));
  std::vector<std::string> prompts;
  for (std::int32_t i = 0; i < n; ++i) {
    prompts.push_back(fill_to(prefix, words, offsets[static_cast<std::size_t>(i) % offsets.size()], prompt_len, tokenizer));
  }
  return prompts;
}

}  // namespace peregrine
