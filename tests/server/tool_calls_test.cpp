// Tool calls out of streamed text (server/tool_calls.h): Hermes <tool_call> blocks however the
// text is split, blocks that do not parse kept as content, the generic JSON fallback for a
// declared tool only, and the grammar of a forced call taking exactly the calls it should.
#include "peregrine/server/tool_calls.h"

#include <gtest/gtest.h>

#include "peregrine/sampling/grammar.h"
#include "grammar_text.h"
#include "test_models.h"

namespace peregrine {
namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
};

// `text` pushed `step` bytes at a time, then flushed.
Parsed parse(std::string_view text, std::size_t step, std::vector<std::string> names = {"get_weather"}) {
  ToolCallParser p(7, std::move(names));
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

  const auto bad = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "integer", "minimum": 0}}}])");
  auto refused = tool_call_gbnf(bad, "", false);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("minimum"), std::string::npos);
}

}  // namespace
}  // namespace peregrine
