// Tool calls out of streamed text (server/tool_calls.h): Hermes <tool_call> blocks however the
// text is split, blocks that do not parse kept as content, the generic JSON fallback for a
// declared tool only, Llama 3.x, Mistral and DeepSeek R1 replies, each real chat template's
// format (and Mistral's call ids through its own template), and the grammar of a forced call
// taking exactly the calls it should.
#include "peregrine/server/tool_calls.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

#include "peregrine/sampling/grammar.h"
#include "peregrine/tokenizer/chat_template.h"
#include "grammar_text.h"
#include "test_models.h"
#include "test_paths.h"

namespace peregrine {
namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

// `text` pushed `step` bytes at a time, then flushed.
Parsed parse(std::string_view text, std::size_t step, std::vector<std::string> names = {"get_weather"},
             ToolCallFormat format = ToolCallFormat::kHermes) {
  ToolCallParser p(7, std::move(names), format);
  Parsed out;
  for (std::size_t i = 0; i < text.size(); i += step) {
    out.content += p.push(text.substr(i, step));
    for (ToolCall& c : p.take_calls()) out.calls.push_back(std::move(c));
  }
  out.content += p.flush();
  for (ToolCall& c : p.take_calls()) out.calls.push_back(std::move(c));
  return out;
}

TEST(ToolCallParser, HermesBlocksAnyWayTheTextIsSplit) {
  const std::string text =
      "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": \\\"CET\\\"}\"}</tool_call> done <tool_c";
  for (std::size_t step : {1, 2, 5, 13, 1000}) {
    const Parsed p = parse(text, step);
    ASSERT_EQ(p.calls.size(), 2u) << step;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(p.calls[1].name, "get_time");
    EXPECT_EQ(p.calls[1].arguments, R"({"zone": "CET"})");
    EXPECT_NE(p.calls[0].id, p.calls[1].id);
    EXPECT_EQ(p.content, "Let me check.\n done <tool_c") << step;
  }
}

TEST(ToolCallParser, BlocksThatDoNotParseStayContent) {
  const std::string bad = "<tool_call>{\"name\": 3}</tool_call> and <tool_call>not json</tool_call>";
  const Parsed p = parse(bad, 3);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, bad);
  const Parsed open = parse("text <tool_call>{\"name\": \"get_weather\", \"argu", 4);
  EXPECT_TRUE(open.calls.empty());
  EXPECT_EQ(open.content, "text <tool_call>{\"name\": \"get_weather\", \"argu");
}

TEST(ToolCallParser, AJsonReplyNamingADeclaredToolIsACall) {
  for (const char* reply : {"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}",
                            " ```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n```"}) {
    const Parsed p = parse(reply, 4);
    ASSERT_EQ(p.calls.size(), 1u) << reply;
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(p.content, "");
  }
  for (const char* reply : {"{\"name\": \"other\", \"arguments\": {}}", "{\"answer\": 42}", "```python\nprint(1)\n```"}) {
    const Parsed p = parse(reply, 4);
    EXPECT_TRUE(p.calls.empty()) << reply;
    EXPECT_EQ(p.content, reply);
  }
}

std::string chat_template_source(const std::string& name) {
  return test::read_file(test::shared_dir() + "/chat-templates/" + name + ".jinja");
}

TEST(ToolCallFormat, EachRealTemplatesFormat) {
  EXPECT_EQ(tool_call_format(chat_template_source("Qwen-Qwen2.5-7B-Instruct")), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format(chat_template_source("meta-llama-Llama-3.1-8B-Instruct")), ToolCallFormat::kLlama3);
  EXPECT_EQ(tool_call_format(chat_template_source("mistralai-Mistral-Nemo-Instruct-2407")), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format(chat_template_source("google-gemma-2-2b-it")), ToolCallFormat::kGeneric);
  EXPECT_EQ(tool_call_format(chat_template_source("microsoft-Phi-3.5-mini-instruct")), ToolCallFormat::kGeneric);
}

TEST(ToolCallParser, Llama3RepliesWithParameters) {
  for (const char* reply : {R"({"name": "get_weather", "parameters": {"city": "Oslo"}})",
                            "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"}) {
    for (std::size_t step : {1, 4, 1000}) {
      const Parsed p = parse(reply, step, {"get_weather"}, ToolCallFormat::kLlama3);
      ASSERT_EQ(p.calls.size(), 1u) << reply;
      EXPECT_EQ(p.calls[0].name, "get_weather");
      EXPECT_EQ(p.calls[0].arguments, R"({"city":"Oslo"})");
      EXPECT_EQ(p.content, "");
    }
  }
  for (const char* reply : {"It is sunny <tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call>",
                            R"({"name": "other", "parameters": {}})", "<b>bold</b>"}) {
    const Parsed p = parse(reply, 3, {"get_weather"}, ToolCallFormat::kLlama3);
    EXPECT_TRUE(p.calls.empty()) << reply;
    EXPECT_EQ(p.content, reply);
  }
}

TEST(ToolCallParser, MistralCallsAfterTheMarkerOrAsTheWholeReply) {
  const std::string marked = R"(Checking. [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}, {"name": "get_time", "arguments": {"zone": "CET"}}])";
  for (std::size_t step : {1, 5, 1000}) {
    const Parsed p = parse(marked, step, {"get_weather", "get_time"}, ToolCallFormat::kMistral);
    ASSERT_EQ(p.calls.size(), 2u) << step;
    EXPECT_EQ(p.content, "Checking. ");
    EXPECT_EQ(p.calls[1].arguments, R"({"zone":"CET"})");
    for (const ToolCall& c : p.calls) {
      EXPECT_EQ(c.id.size(), 9u);
      EXPECT_TRUE(std::all_of(c.id.begin(), c.id.end(), [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)); }));
    }
    EXPECT_NE(p.calls[0].id, p.calls[1].id);
  }
  const Parsed bare = parse(R"([{"name": "get_weather", "arguments": {"city": "Rome"}}])", 2, {"get_weather"}, ToolCallFormat::kMistral);
  ASSERT_EQ(bare.calls.size(), 1u);  // the marker left out by the detokenizer
  EXPECT_EQ(bare.content, "");
  for (const char* reply : {"[1, 2, 3]", R"(x [TOOL_CALLS][{"name": "get_weather"}])", "[TOOL_CALLS] not json"}) {
    const Parsed p = parse(reply, 2, {"get_weather"}, ToolCallFormat::kMistral);
    EXPECT_TRUE(p.calls.empty()) << reply;
    EXPECT_EQ(p.content, reply);
  }
}

// "Weather in Rome?", an assistant turn making `call`, and its result {"temp": 21}, through
// the template `source`.
Expected<std::string> render_call_and_result(const std::string& source, const ToolCall& call, const ChatTemplateInputs& in) {
  PEREGRINE_ASSIGN_OR_RETURN(auto tmpl, ChatTemplate::parse(source));
  std::vector<ChatMessage> messages = {{"user", "Weather in Rome?"}, {"assistant", ""}, {"tool", "{\"temp\": 21}"}};
  messages[1].tool_calls = nlohmann::ordered_json::array(
      {{{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}}});
  messages[2].tool_call_id = call.id;
  return tmpl.render(messages, in);
}

// DeepSeek R1's call blocks (its template's text: tool type, separator, name, a ```json fence).
const std::string kR1Reply = "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
                             "```json\n{\"city\": \"Rome\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function"
                             "<｜tool▁sep｜>ping\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

TEST(ToolCallParser, DeepSeekR1CallBlocksAfterTheMarker) {
  for (std::size_t step : {1, 2, 5, 1000}) {
    const Parsed p = parse(kR1Reply, step, {"get_weather", "ping"}, ToolCallFormat::kDeepSeekR1);
    EXPECT_EQ(p.content, "Let me look.") << step;
    ASSERT_EQ(p.calls.size(), 2u) << step;
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(p.calls[0].arguments, R"({"city":"Rome"})");
    EXPECT_EQ(p.calls[1].name, "ping");
    EXPECT_EQ(p.calls[1].arguments, "{}");
  }
  // Bare arguments and no closing marker (output cut at EOS) still read; a block that does not
  // parse leaves the whole reply as content; text without the marker is content.
  const Parsed bare = parse("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>ping\n{}<｜tool▁call▁end｜>", 3,
                            {"ping"}, ToolCallFormat::kDeepSeekR1);
  ASSERT_EQ(bare.calls.size(), 1u);
  EXPECT_EQ(bare.content, "");
  const std::string broken = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>ping\n```json\n{\n```<｜tool▁call▁end｜>";
  const Parsed kept = parse(broken, 4, {"ping"}, ToolCallFormat::kDeepSeekR1);
  EXPECT_TRUE(kept.calls.empty());
  EXPECT_EQ(kept.content, broken);
  const Parsed plain = parse("The answer is <｜tool no.", 2, {"ping"}, ToolCallFormat::kDeepSeekR1);
  EXPECT_TRUE(plain.calls.empty());
  EXPECT_EQ(plain.content, "The answer is <｜tool no.");
}

// DeepSeek R1's templates, where $PEREGRINE_EXTRA_CHAT_TEMPLATES holds them (llama.cpp's
// models/templates: DeepSeek's own, which shows calls but not tools, and llama.cpp's rewrite,
// which shows both): the format, who describes the tools, and parsed calls rendered back.
TEST(ToolCallFormat, DeepSeekR1Templates) {
  const char* dir = std::getenv("PEREGRINE_EXTRA_CHAT_TEMPLATES");
  if (dir == nullptr) GTEST_SKIP() << "PEREGRINE_EXTRA_CHAT_TEMPLATES not set (a llama.cpp checkout's models/templates)";
  for (const auto& [name, shows] : {std::pair<const char*, bool>{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", false},
                                    {"llama-cpp-deepseek-r1", true}}) {
    const std::string source = test::read_file(std::string(dir) + "/" + name + ".jinja");
    EXPECT_EQ(tool_call_format(source), ToolCallFormat::kDeepSeekR1) << name;
    EXPECT_EQ(template_shows_tools(source, ToolCallFormat::kDeepSeekR1), shows) << name;
    const Parsed p = parse(kR1Reply, 3, {"get_weather", "ping"}, ToolCallFormat::kDeepSeekR1);
    ChatTemplateInputs in;
    in.bos_token = "<｜begin▁of▁sentence｜>";
    in.add_generation_prompt = true;
    auto text = render_call_and_result(source, p.calls[0], in);
    ASSERT_TRUE(text) << name << ": " << text.status().message();
    EXPECT_NE(text->find("<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather"), std::string::npos) << *text;
    EXPECT_NE(text->find("<｜tool▁output▁begin｜>{\"temp\": 21}"), std::string::npos) << *text;
  }
}

// A two-turn conversation with a parsed call renders through each real template (Mistral's
// raises on call ids that are not 9 letters and digits).
TEST(ToolCallParser, ParsedCallsRenderBackThroughTheirTemplates) {
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "The weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const std::pair<const char*, const char*> cases[] = {
      {"mistralai-Mistral-Nemo-Instruct-2407", R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}}])"},
      {"meta-llama-Llama-3.1-8B-Instruct", R"({"name": "get_weather", "parameters": {"city": "Rome"}})"},
      {"Qwen-Qwen2.5-7B-Instruct", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"}};
  for (const auto& [name, reply] : cases) {
    const std::string source = chat_template_source(name);
    const Parsed p = parse(reply, 3, {"get_weather"}, tool_call_format(source));
    ASSERT_EQ(p.calls.size(), 1u) << name;
    ChatTemplateInputs in;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.tools = tools;
    auto text = render_call_and_result(source, p.calls[0], in);
    ASSERT_TRUE(text) << name << ": " << text.status().message();
    EXPECT_NE(text->find("get_weather"), std::string::npos) << name;
    EXPECT_NE(text->find("21"), std::string::npos) << name;
  }
}

TEST(ToolCallGrammar, ForcedCallsFollowTheToolsSchemas) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "ping"}}])");
  const Tokenizer& tok = test::llamacpp_vocab("gpt-2");
  const auto trie = TokenTrie::of(tok);
  auto gbnf = tool_call_gbnf(tools, "", true);
  ASSERT_TRUE(gbnf) << gbnf.status().message();
  auto any = Grammar::parse(*gbnf);
  ASSERT_TRUE(any) << any.status().message() << "\n" << *gbnf;
  const char* weather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>";
  const char* ping = "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(test::run(tok, trie, *any, weather).complete);
  EXPECT_TRUE(test::run(tok, trie, *any, std::string(weather) + "\n" + ping).complete);
  EXPECT_FALSE(test::run(tok, trie, *any, "Sure! " + std::string(ping)).accepted);
  const test::TextRun wrong = test::run(tok, trie, *any, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>");
  EXPECT_FALSE(wrong.accepted && wrong.complete);

  auto only = Grammar::parse(*tool_call_gbnf(tools, "ping", false));
  ASSERT_TRUE(only);
  EXPECT_TRUE(test::run(tok, trie, *only, ping).complete);
  EXPECT_FALSE(test::run(tok, trie, *only, weather).accepted);
  EXPECT_FALSE(test::run(tok, trie, *only, std::string(ping) + "\n" + ping).accepted);

  auto llama3 = Grammar::parse(*tool_call_gbnf(tools, "", true, ToolCallFormat::kLlama3));
  ASSERT_TRUE(llama3);
  EXPECT_TRUE(test::run(tok, trie, *llama3, R"({"name": "get_weather", "parameters": {"city": "Rome"}})").complete);
  EXPECT_FALSE(test::run(tok, trie, *llama3, weather).accepted);
  EXPECT_EQ(tool_call_gbnf(tools, "", true, ToolCallFormat::kMistral).status().code(), ErrorCode::kUnsupported);

  // DeepSeek R1: call blocks between its markers, each tool's arguments by its own schema (the
  // rules of the two schemas kept apart), read back by the parser.
  auto r1_text = tool_call_gbnf(tools, "", true, ToolCallFormat::kDeepSeekR1);
  ASSERT_TRUE(r1_text) << r1_text.status().message();
  auto r1 = Grammar::parse(*r1_text);
  ASSERT_TRUE(r1) << r1.status().message() << "\n" << *r1_text;
  const std::string r1_calls = kR1Reply.substr(kR1Reply.find("<｜tool▁calls▁begin｜>"));
  EXPECT_TRUE(test::run(tok, trie, *r1, r1_calls).complete) << *r1_text;
  EXPECT_FALSE(test::run(tok, trie, *r1, kR1Reply).accepted);
  const test::TextRun r1_wrong = test::run(tok, trie, *r1, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                                                          "get_weather\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_FALSE(r1_wrong.accepted && r1_wrong.complete);
  auto r1_ping = Grammar::parse(*tool_call_gbnf(tools, "ping", false, ToolCallFormat::kDeepSeekR1));
  ASSERT_TRUE(r1_ping);
  EXPECT_FALSE(test::run(tok, trie, *r1_ping, r1_calls).accepted);
  EXPECT_EQ(parse(r1_calls, 7, {"get_weather", "ping"}, ToolCallFormat::kDeepSeekR1).calls.size(), 2u);

  // Generic (a template without tools): one bare {"name", "arguments"} object, which the
  // generic parser reads back as the call.
  auto generic = Grammar::parse(*tool_call_gbnf(tools, "", true, ToolCallFormat::kGeneric));
  ASSERT_TRUE(generic);
  const char* bare = R"({"name": "get_weather", "arguments": {"city": "Rome"}})";
  EXPECT_TRUE(test::run(tok, trie, *generic, bare).complete);
  EXPECT_FALSE(test::run(tok, trie, *generic, weather).accepted);
  EXPECT_FALSE(test::run(tok, trie, *generic, R"({"name": "get_weather", "parameters": {"city": "Rome"}})").accepted);
  const Parsed read = parse(bare, 3, {"get_weather", "ping"}, ToolCallFormat::kGeneric);
  ASSERT_EQ(read.calls.size(), 1u);
  EXPECT_EQ(read.calls[0].arguments, R"({"city":"Rome"})");
  EXPECT_EQ(read.content, "");

  const auto bad = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "integer", "minimum": 0}}}])");
  auto refused = tool_call_gbnf(bad, "", false);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("minimum"), std::string::npos);
}

}  // namespace
}  // namespace peregrine
