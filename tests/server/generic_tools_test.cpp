// Tools for chat templates that render none (server/generic_tools.h): the instructions in the
// system message, the conversation's calls and results as plain turns, and the whole prompt
// through a real template without tools (SmolLM2's).
#include "peregrine/server/generic_tools.h"

#include <gtest/gtest.h>

#include "peregrine/server/tool_calls.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using Json = nlohmann::ordered_json;

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

ChatMessage call_turn() {
  ChatMessage m("assistant", "");
  m.tool_calls = Json::parse(R"([{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                                 {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}])");
  return m;
}

ChatMessage result(std::string id, std::string text) {
  ChatMessage m("tool", std::move(text));
  m.tool_call_id = std::move(id);
  return m;
}

TEST(GenericTools, InstructionsCallsAndResultsBecomePlainTurns) {
  const std::vector<ChatMessage> in = {{"system", "Be brief."}, {"user", "Weather?"}, call_turn(),
                                       result("c1", "25 C"), result("c2", "19 C"), {"user", "Thanks"}};
  const std::vector<ChatMessage> out = generic_tool_messages(in, kTools);
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_TRUE(out[0].content.starts_with("Be brief.\n\nYou can call the functions below.")) << out[0].content;
  EXPECT_TRUE(out[0].content.ends_with(
      R"({"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}}}})"))
      << out[0].content;
  EXPECT_EQ(out[2].role, "assistant");
  EXPECT_EQ(out[2].content, "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n"
                            "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\"}}");
  EXPECT_TRUE(out[2].tool_calls.is_null());
  EXPECT_EQ(out[3].role, "user");
  EXPECT_EQ(out[3].content, "Result of get_weather: 25 C\nResult of get_weather: 19 C");
  EXPECT_EQ(out[4].content, "Thanks");
}

TEST(GenericTools, NoSystemMessageGetsOneAndNoToolsChangesNothingElse) {
  const std::vector<ChatMessage> both = {{"system", "S"}, {"user", "Hi"}};
  const std::vector<ChatMessage> first_user = generic_tool_messages(both, kTools, ToolInstructions::kFirstUser);
  ASSERT_EQ(first_user.size(), 2u);
  EXPECT_EQ(first_user[0].content, "S");
  EXPECT_TRUE(first_user[1].content.starts_with("You can call the functions below."));
  EXPECT_TRUE(first_user[1].content.ends_with("\n\nHi"));
  const std::vector<ChatMessage> plain = {{"user", "Hi"}};
  const std::vector<ChatMessage> with = generic_tool_messages(plain, kTools);
  ASSERT_EQ(with.size(), 2u);
  EXPECT_EQ(with[0].role, "system");
  EXPECT_TRUE(with[0].content.starts_with("You can call the functions below."));
  const std::vector<ChatMessage> without = generic_tool_messages(plain, Json());
  ASSERT_EQ(without.size(), 1u);
  EXPECT_EQ(without[0].content, "Hi");
}

// DeepSeek R1's template shows calls and results itself: only the instructions (its call
// blocks) are added.
TEST(GenericTools, DeepSeekR1InstructionsLeaveCallsAndResultsToTheTemplate) {
  const std::vector<ChatMessage> in = {{"user", "Weather?"}, call_turn(), result("c1", "25 C")};
  const std::vector<ChatMessage> out = generic_tool_messages(in, kTools, ToolInstructions::kSystem, ToolSyntax::kDeepSeekR1);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_NE(out[0].content.find("<｜tool▁call▁begin｜>function<｜tool▁sep｜>"), std::string::npos) << out[0].content;
  EXPECT_NE(out[0].content.find(R"({"name":"get_weather")"), std::string::npos) << out[0].content;
  EXPECT_EQ(out[2].tool_calls, in[1].tool_calls);
  EXPECT_EQ(out[3].role, "tool");
  EXPECT_EQ(out[3].tool_call_id, "c1");
}

TEST(GenericTools, RealTemplatesWithoutToolsRenderThem) {
  const std::vector<ChatMessage> in = {{"user", "Weather?"}, call_turn(), result("c1", "25 C")};
  for (const char* name : {"microsoft-Phi-3.5-mini-instruct", "google-gemma-2-2b-it"}) {
    const std::string source = test::read_file(test::shared_dir() + "/chat-templates/" + name + ".jinja");
    EXPECT_EQ(tool_call_format(source), ToolCallFormat::kGeneric) << name;
    auto tmpl = ChatTemplate::parse(source);
    ASSERT_TRUE(tmpl) << tmpl.status().message();
    // Gemma 2's template refuses a system role: the instructions lead the first user turn there.
    const bool system_role = std::string_view(name) != "google-gemma-2-2b-it";
    EXPECT_EQ(tmpl->render(generic_tool_messages(in, kTools), {}).has_value(), system_role) << name;
    auto text = tmpl->render(generic_tool_messages(in, kTools, ToolInstructions::kFirstUser), {});
    ASSERT_TRUE(text) << name << ": " << text.status().message();
    for (const char* part : {"You can call the functions below.", "\"name\":\"get_weather\"", "Result of get_weather: 25 C",
                             "{\"city\":\"Rome\"}"}) {
      EXPECT_NE(text->find(part), std::string::npos) << part << " in\n" << *text;
    }
  }
}

}  // namespace
}  // namespace peregrine
