// Chat templates: our Jinja interpreter against jinja2 itself (tools/render_chat_template.py, the
// environment transformers' apply_chat_template uses) on the real templates in
// ../shared/chat-templates and the built-ins; interpreter unit cases; errors; limits; loading
// from GGUF metadata and Hugging Face folders.
#include "peregrine/tokenizer/chat_template.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "peregrine/formats/gguf/gguf_writer.h"
#include "test_paths.h"

namespace peregrine {
namespace {

using json = nlohmann::ordered_json;  // messages keep their key order (role, content)

const std::vector<ChatMessage> kSystemUser = {{"system", "Be brief."}, {"user", "Hi"}};

Expected<std::string> render_source(std::string_view source, std::span<const ChatMessage> messages = kSystemUser,
                                    const ChatTemplateInputs& inputs = {false, "<s>", "</s>"}) {
  PEREGRINE_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source));
  return t.render(messages, inputs);
}

json messages_json(std::span<const ChatMessage> messages) {
  json out = json::array();
  for (const auto& m : messages) out.push_back({{"role", m.role}, {"content", m.content}});
  return out;
}

// Runs jinja2 on a list of cases. A missing python3 or jinja2 (scripts/setup.sh installs both) is
// a test failure naming it, and nullopt: the comparison cannot be skipped.
std::optional<json> run_jinja2(const json& cases) {
  if (!std::filesystem::exists("/usr/bin/python3")) {
    ADD_FAILURE() << "/usr/bin/python3 not found (scripts/setup.sh installs it): cannot compare with jinja2";
    return std::nullopt;
  }
  const std::string dir = test::make_temp_dir();
  std::ofstream(dir + "/in.json") << cases.dump();
  const std::string cmd = "/usr/bin/python3 " + test::source_dir() + "/tools/render_chat_template.py < " + dir +
                          "/in.json > " + dir + "/out.json 2> " + dir + "/err.txt";
  const int rc = std::system(cmd.c_str());
  if (WIFEXITED(rc) && WEXITSTATUS(rc) == 3) {
    ADD_FAILURE() << "python3 has no jinja2 (scripts/setup.sh installs python3-jinja2): cannot compare with jinja2";
    return std::nullopt;
  }
  EXPECT_EQ(rc, 0) << test::read_file(dir + "/err.txt");
  return json::parse(test::read_file(dir + "/out.json"));
}

json jinja2_case(std::string_view source, std::span<const ChatMessage> messages, const ChatTemplateInputs& inputs) {
  return {{"template", source},
          {"messages", messages_json(messages)},
          {"add_generation_prompt", inputs.add_generation_prompt},
          {"bos_token", inputs.bos_token},
          {"eos_token", inputs.eos_token}};
}

// ---- interpreter unit cases (expected strings are jinja2's; ExpectationsAreJinja2s checks) ----

struct InterpreterCase {
  const char* source;
  const char* expected;
};

const InterpreterCase kInterpreterCases[] = {
    {"{{ 1 + 2 * 3 }}",
     "7"},
    {"{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7.5 // 2 }}",
     "3.5 3 -4 2 1024 3.0"},
    {"{{ 1e16 }} {{ 1e15 }} {{ 0.1 + 0.2 }} {{ 1.0 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ -2.5 }}",
     "1e+16 1000000000000000.0 0.30000000000000004 1.0 1e-05 1.5e-07 -2.5"},
    {"{{ 'a' ~ 1 ~ none ~ true }}",
     "a1NoneTrue"},
    {"{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}] }}",
     "[1, 'a', None, True, 1.5, {'k': \"it's\"}]"},
    {"{{ 'abc'[1:] }}{{ 'abc'[::-1] }}{{ [1, 2, 3][:-1] }}{{ 'héllo'[1] }}{{ [1, 2, 3][-1] }}",
     "bccba[1, 2]é3"},
    {"{{ 'x' if false }}|{{ 'y' if 0 else 'z' }}",
     "|z"},
    {"{{ none and 1 }} {{ 0 or 'b' }} {{ not [] }}",
     "None b True"},
    {"{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }}",
     "True False True"},
    {"{{ '  hi  ' | trim }}|{{ 'Hello' | upper }}|{{ ['a', 'b'] | join(', ') }}|{{ 'abc' | length }}|{{ 'naïve' | length }}|{{ 'hello world' | capitalize }}",
     "hi|HELLO|a, b|3|5|Hello world"},
    {"{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}",
     "['Hi']"},
    {"{{ messages | rejectattr('role', 'equalto', 'user') | list | length }}",
     "1"},
    {"{{ {'b': 1, 'a': [1, 'x', none, true, 2.5]} | tojson }}",
     "{\"b\": 1, \"a\": [1, \"x\", null, true, 2.5]}"},
    {"{{ {'a': [1, {}], 'b': [], 'c': {'d': 'e'}} | tojson(indent=2) }}",
     "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": [],\n  \"c\": {\n    \"d\": \"e\"\n  }\n}"},
    {"{{ 'é\"\\\\\\n\\t' | tojson }}",
     "\"é\\\"\\\\\\n\\t\""},
    {"{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }}{% if not loop.last %},{% endif %}{% endfor %}",
     "a=1,b=2"},
    {"{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% endfor %}",
     "1/2:2 2/2:4 "},
    {"{% for x in [] %}a{% else %}empty{% endfor %}",
     "empty"},
    {"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
     "2"},
    {"{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% endfor %}",
     "02"},
    {"{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}",
     "01020"},
    {"  {% if true %}\n  x\n  {% endif %}\n  {{ 1 }}\n",
     "  x\n  1"},
    {"a  {{- ' b ' -}}  c",
     "a b c"},
    {"{# comment #}\nx{#- c -#}  y\n  {#- c #}\n{%+ if true %}z{% endif +%}\nw",
     "xyz\nw"},
    {"{% raw %}{{ not rendered }}{% endraw %}",
     "{{ not rendered }}"},
    {"{{ foo }}|{{ foo is defined }}|{{ foo | default('d') }}|{{ foo | length }}|{{ messages[5] is defined }}|{{ messages[0].nope is defined }}|{{ none.x is defined }}",
     "|False|d|0|False|False|False"},
    {"{{ ' a,b '.strip().split(',') }} {{ 'Hi'.startswith('H') }} {{ {'a': 1}.get('b', 2) }} {{ 'x y'.title() }} {{ {'a': 1}.keys() | list }}",
     "['a', 'b'] True 2 X Y ['a']"},
    {"{{ 'a\\tb\\u00e9\\x41' }}|{{ 'it\\'s' }}|{{ \"q\\\"\" }}",
     "a\tbéA|it's|q\""},
    {"{% if messages[0]['role'] == 'system' %}{% set sys = messages[0].content %}{% set rest = messages[1:] %}{% endif %}{{ sys }}:{{ rest | length }}",
     "Be brief.:1"},
    {"{{ 3 is odd }} {{ 'a' is string }} {{ 1 is number }} {{ {} is mapping }} {{ [] is iterable }} {{ none is none }} {{ true is boolean }} {{ 1 is sameas 1 }} {{ 10 is divisibleby 5 }}",
     "True True True True True True True True True"},
    {"{{ [3, 1, 2] | sort }} {{ [1, 2, 3] | reverse | list }} {{ [1, 2, 2] | unique | list }} {{ [1, 2, 3] | sum }} {{ [1, 2] | first }}{{ [1, 2] | last }}",
     "[1, 2, 3] [3, 2, 1] [1, 2] 6 12"},
    {"{{ '42' | int + 1 }} {{ 'x' | int(7) }} {{ 2.7 | int }} {{ '1.5' | float }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ -3 | abs }}",
     "43 7 2 1.5 2.0 3.14 3"},
    {"{{ 'a b a' | replace('a', 'c') }} {{ 'line1\nline2' | indent(2) }} {{ 'x' | string }}{{ 1 | string }}",
     "c b c line1\n  line2 x1"},
    {"{% set t %}inner {{ 1 }}{% endset %}[{{ t }}]{% filter upper %}up {{ 'x' }}{% endfilter %}",
     "[inner 1]UP X"},
    {"{{ messages[0] }}",
     "{'role': 'system', 'content': 'Be brief.'}"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}{{ loop is defined }}",
     "37False"},
    {"{% for m in messages %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }}{{ loop.revindex }}{% endfor %}",
     "FalseTrue2TrueFalse1"},
    {"{{ (1, 2)[0] }}{{ 'ab' * 2 }}{{ [0] * 2 }}{{ 'abc' < 'abd' }}{{ [1, 2] == [1, 2] }}{{ 1 == 1.0 }}{{ 1 == true }}",
     "1abab[0, 0]TrueTrueTrueTrue"},
    {"{{ 'hé' ~ '世界🦜' | upper }}",
     "hé世界🦜"},
    {"{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(punct='.', name='c') }}|{{ greet() }}|",
     "Hi a! Hi b? Hi c.|Hi !|"},
    {"{%- macro depth(n) -%}{{ n }}{% if n > 0 %}({{ depth(n - 1) }}){% endif %}{%- endmacro -%}{{ depth(3) }}",
     "3(2(1(0)))"},
    {"{% set x = 'top' %}{% macro show() %}{{ x }}/{{ y is defined }}{% set x = 'inner' %}{{ x }}{% endmacro %}{% for y in [1] %}{{ show() }}{% endfor %}/{{ x }}",
     "top/Falseinner/top"},
    {"{% macro f(a) %}{{ a }}{{ varargs | length }}{{ varargs[1] }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, k=4) }}",
     "123{'k': 4}"},
    {"{{ '<{}|{}|{x}>{{}}'.format('a', 'b', x=3) }}{{ '{1}{0}'.format('a', 'b') }}|{{ none | selectattr('type', 'equalto', 'f') | list }}{{ none | map(attribute='a') | list | length }}{{ strftime_now is defined }}",
     "<a|b|3>{}ba|[]0True"},
    {"{% macro t(m) %}{{ m.role | upper }}{% endmacro %}{% for m in messages %}{{ t(m) }};{% endfor %}{{ t(messages[0]) | length }}",
     "SYSTEM;USER;6"},
};

TEST(ChatTemplateInterpreter, RendersLikeJinja2) {
  for (const auto& c : kInterpreterCases) {
    const auto out = render_source(c.source);
    ASSERT_TRUE(out) << c.source << "\n" << out.status().message();
    EXPECT_EQ(*out, c.expected) << c.source;
  }
}

TEST(ChatTemplateInterpreter, ExpectationsAreJinja2s) {
  json cases = json::array();
  for (const auto& c : kInterpreterCases) cases.push_back(jinja2_case(c.source, kSystemUser, {false, "<s>", "</s>"}));
  const auto results = run_jinja2(cases);
  if (!results) return;
  ASSERT_EQ(results->size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ((*results)[i].value("text", "<error>"), kInterpreterCases[i].expected) << kInterpreterCases[i].source;
  }
}

void expect_error(std::string_view source, const std::string& line, const std::string& what) {
  const auto out = render_source(source);
  ASSERT_FALSE(out) << source << " rendered " << *out;
  EXPECT_EQ(out.status().code(), ErrorCode::kInvalidArgument) << source;
  EXPECT_NE(out.status().message().find("chat template line " + line + ":"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find(what), std::string::npos) << out.status().message();
}

TEST(ChatTemplateInterpreter, SyntaxErrorsNameTheLine) {
  expect_error("{% if %}", "1", "expected an expression");
  expect_error("line 1\n{{ 1 + }}", "2", "expected an expression");
  expect_error("{% for x in messages %}\n{{ x }}", "2", "expected 'endfor'");
  expect_error("a\n\n{% endif %}", "3", "unexpected 'endif'");
  expect_error("{{ 'unterminated }}", "1", "unterminated string");
  expect_error("{{ a b }}", "1", "expected '}}'");
  expect_error("{% call f() %}{% endcall %}", "1", "unsupported tag 'call'");
  expect_error("{% macro f(a %}{% endmacro %}", "1", "unexpected '}'");
  expect_error("{% macro f() %}\n{{ x }}", "2", "expected 'endmacro'");
  expect_error("{% break %}", "1", "outside of a loop");
  expect_error("{{ (1 }}", "1", "unexpected '}'");
  expect_error("{{ 1 < 2 < 3 }}", "1", "chained comparisons");
  expect_error("{{ 99999999999999999999 }}", "1", "too large");
}

TEST(ChatTemplateInterpreter, RuntimeErrorsNameTheLine) {
  expect_error("a\n\n{{ foo.bar }}", "3", "'foo' is undefined");
  expect_error("{{ foo + 1 }}", "1", "'foo' is undefined");
  expect_error("{{ foo[0] }}", "1", "'foo' is undefined");
  expect_error("\n{{ 1 + 'a' }}", "2", "unsupported operand type(s) for +: 'int' and 'str'");
  expect_error("{{ 1 // 0 }}", "1", "division");
  expect_error("{{ 9223372036854775807 + 1 }}", "1", "integer overflow");
  expect_error("{{ messages | items }}", "1", "Can only get item pairs from a mapping");
  expect_error("{{ foo | tojson }}", "1", "not JSON serializable");
  expect_error("{{ x | nosuchfilter }}", "1", "no filter named 'nosuchfilter'");
  expect_error("{{ 1 is nosuchtest }}", "1", "no test named 'nosuchtest'");
  expect_error("{{ 'a'.nosuchmethod() }}", "1", "has no method 'nosuchmethod'");
  expect_error("{% set x = 1 %}{% set x.a = 2 %}", "1", "only on namespace()");
  expect_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}", "1", "too many values to unpack");
  expect_error("x\n{{ raise_exception('Custom failure') }}", "2", "Custom failure");
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}", "1", "macro calls nested deeper than 64");
  expect_error("{% macro f() %}\n{{ nope.x }}{% endmacro %}{{ f() }}", "2", "'nope' is undefined");
}

TEST(ChatTemplateInterpreter, LimitsStopHostileTemplates) {
  const std::string deep_parens = "{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}";
  expect_error(deep_parens, "1", "nested too deeply");
  std::string deep_blocks;
  for (int i = 0; i < 500; ++i) deep_blocks += "{% if true %}";
  expect_error(deep_blocks, "1", "nested too deeply");
  expect_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}", "1",
               "nested deeper than");
  expect_error("{% set ns = namespace() %}{% set ns.me = ns %}", "1", "cannot hold another namespace");
  expect_error("{{ 'x' * 100000000000 }}", "1", "result larger than");
  expect_error("{% for i in range(1000) %}{{ 'x' * 100000 }}{% endfor %}", "1", "output longer than");
  expect_error("{% for i in range(2000000) %}{% endfor %}", "1", "range() longer than");
  expect_error("{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(2) %}{% endfor %}{% endfor %}{% endfor %}",
               "1", "loop iterations");
}

// Every prefix and a byte-flipped copy of the real templates parse or fail with a Status, and
// those that parse render or fail with a Status: untrusted templates never crash.
TEST(ChatTemplateInterpreter, DamagedTemplatesFailCleanly) {
  for (const char* name : {"Qwen-Qwen2.5-7B-Instruct", "google-gemma-2-2b-it", "meta-llama-Llama-3.1-8B-Instruct",
                           "microsoft-Phi-3.5-mini-instruct", "mistralai-Mistral-Nemo-Instruct-2407"}) {
    const std::string source = test::read_file(test::shared_dir() + "/chat-templates/" + name + ".jinja");
    ASSERT_FALSE(source.empty()) << name;
    int failures = 0;
    for (std::size_t i = 0; i < source.size(); i += 3) {
      std::string flipped = source;
      flipped[i] = static_cast<char>(flipped[i] ^ 0x5A);
      for (const std::string& damaged : {source.substr(0, i), flipped}) {
        const auto out = render_source(damaged, kSystemUser, {true, "<s>", "</s>"});
        if (out) continue;
        ++failures;
        EXPECT_EQ(out.status().code(), ErrorCode::kInvalidArgument) << out.status().message();
        EXPECT_TRUE(out.status().message().starts_with("chat template line ")) << out.status().message();
      }
    }
    EXPECT_GT(failures, 0) << name;
  }
}

// ---- the real templates and the built-ins against jinja2 ----

std::vector<std::vector<ChatMessage>> conversations() {
  return {
      {{"user", "Hello!"}},
      {{"system", "You are a helpful assistant."}, {"user", "What is 2+2?"}},
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "Tell me a joke."}},
      {{"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}},
      {{"user", "  Ünïcödé 世界 🦜 \"double\" 'single' \\ {{ not jinja }} \n\tnew line\n  "},
       {"assistant", " </s><|im_end|> [INST] "},
       {"user", "\u2003em space\u2003"}},
      {{"user", "a"}, {"user", "b"}},
      {{"system", "sys"}, {"assistant", "starts with the assistant"}},
      {},
  };
}

struct TemplateUnderTest {
  std::string name;
  std::string source;
};

class RealChatTemplateTest : public testing::TestWithParam<std::string> {
 protected:
  TemplateUnderTest load() const {
    const std::string& p = GetParam();
    if (p.starts_with("builtin:")) return {p, std::string(*ChatTemplate::builtin_source(p.substr(8)))};
    if (p.starts_with("extra:")) return {p, test::read_file(p.substr(6))};
    return {p, test::read_file(test::shared_dir() + "/chat-templates/" + p + ".jinja")};
  }
};

TEST_P(RealChatTemplateTest, RendersExactlyAsJinja2) {
  const TemplateUnderTest t = load();
  ASSERT_FALSE(t.source.empty()) << t.name;
  auto parsed = ChatTemplate::parse(t.source);
  ASSERT_TRUE(parsed) << parsed.status().message();
  json cases = json::array();
  std::vector<std::pair<std::vector<ChatMessage>, ChatTemplateInputs>> inputs;
  for (const auto& conversation : conversations()) {
    for (const bool generation_prompt : {true, false}) {
      const ChatTemplateInputs in{generation_prompt, "<s>", "</s>"};
      cases.push_back(jinja2_case(t.source, conversation, in));
      inputs.emplace_back(conversation, in);
    }
  }
  const auto results = run_jinja2(cases);
  if (!results) return;
  ASSERT_EQ(results->size(), inputs.size());
  int rendered = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const json& expected = (*results)[i];
    const auto ours = parsed->render(inputs[i].first, inputs[i].second);
    SCOPED_TRACE(t.name + " case " + std::to_string(i) + ": " + cases[i]["messages"].dump());
    if (expected.contains("text")) {
      ASSERT_TRUE(ours) << ours.status().message();
      EXPECT_EQ(*ours, expected["text"].get<std::string>());
      ++rendered;
    } else {
      ASSERT_FALSE(ours) << "jinja2 failed with " << expected["error"] << " but we rendered " << *ours;
      EXPECT_EQ(ours.status().code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(ours.status().message().find(expected["error"].get<std::string>()), std::string::npos)
          << ours.status().message() << " vs jinja2's " << expected["error"];
    }
  }
  EXPECT_GE(rendered, 6) << "too few conversations render for the comparison to mean much";
}

// More templates, by hand: every .jinja in $PEREGRINE_EXTRA_CHAT_TEMPLATES (e.g. a llama.cpp
// checkout's models/templates), against jinja2 the same way; none when it is not set.
std::vector<std::string> extra_templates() {
  std::vector<std::string> names;
  const char* dir = std::getenv("PEREGRINE_EXTRA_CHAT_TEMPLATES");
  if (dir == nullptr) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".jinja") names.push_back("extra:" + entry.path().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(ExtraTemplates, RealChatTemplateTest, testing::ValuesIn(extra_templates()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = std::filesystem::path(info.param.substr(6)).stem().string();
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

INSTANTIATE_TEST_SUITE_P(SharedTemplates, RealChatTemplateTest,
                         testing::Values("Qwen-Qwen2.5-7B-Instruct", "google-gemma-2-2b-it",
                                         "meta-llama-Llama-3.1-8B-Instruct", "microsoft-Phi-3.5-mini-instruct",
                                         "mistralai-Mistral-Nemo-Instruct-2407", "builtin:chatml", "builtin:llama-2",
                                         "builtin:llama-3"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(ChatTemplateGemma, SystemRoleRaisesTheTemplatesMessage) {
  auto t = ChatTemplate::parse(test::read_file(test::shared_dir() + "/chat-templates/google-gemma-2-2b-it.jinja"));
  ASSERT_TRUE(t) << t.status().message();
  const auto out = t->render(kSystemUser, {});
  ASSERT_FALSE(out);
  EXPECT_EQ(out.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("System role not supported"), std::string::npos) << out.status().message();
}

// ---- the built-ins' formats, written out ----

const std::vector<ChatMessage> kFourTurns = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Tell me a joke."}};

std::string render_builtin(std::string_view name, std::span<const ChatMessage> messages, const ChatTemplateInputs& in) {
  auto t = ChatTemplate::builtin(name);
  EXPECT_TRUE(t) << t.status().message();
  auto out = t->render(messages, in);
  EXPECT_TRUE(out) << out.status().message();
  return out ? *out : "";
}

TEST(ChatTemplateBuiltin, Chatml) {
  EXPECT_EQ(render_builtin("chatml", kFourTurns, {true, "", ""}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateBuiltin, Llama2) {
  EXPECT_EQ(render_builtin("llama-2", kFourTurns, {true, "<s>", "</s>"}),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Tell me a joke. [/INST]");
}

TEST(ChatTemplateBuiltin, Llama3) {
  EXPECT_EQ(render_builtin("llama-3", kSystemUser, {true, "<|begin_of_text|>", "<|eot_id|>"}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateBuiltin, UnknownNameListsTheKnownOnes) {
  const auto t = ChatTemplate::builtin("vicuna");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("chatml, llama-2, llama-3"), std::string::npos);
}

// ---- load_chat_template ----

ModelFile gguf_model_with(const std::string& dir, const std::optional<std::string>& chat_template) {
  const std::string path = dir + "/model.gguf";
  GgufWriter w;
  EXPECT_TRUE(w.add("general.architecture", gguf_string("llama")).is_ok());
  if (chat_template) {
    EXPECT_TRUE(w.add("tokenizer.chat_template", gguf_string(*chat_template)).is_ok());
  }
  EXPECT_TRUE(w.begin(path).is_ok());
  EXPECT_TRUE(w.finish().is_ok());
  auto file = GgufFile::open(path);
  EXPECT_TRUE(file) << file.status().message();
  ModelFile m;
  m.format = ModelFormat::kGguf;
  m.path = path;
  m.gguf = std::move(*file);
  return m;
}

TEST(LoadChatTemplate, FromGgufMetadata) {
  const std::string phi = test::read_file(test::shared_dir() + "/chat-templates/microsoft-Phi-3.5-mini-instruct.jinja");
  const ModelFile m = gguf_model_with(test::make_temp_dir(), phi);
  auto t = load_chat_template(m);
  ASSERT_TRUE(t) << t.status().message();
  const auto out = t->render(kSystemUser, {true, "<s>", "<|endoftext|>"});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ(*out, "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n");
}

TEST(LoadChatTemplate, GgufWithoutTemplateFallsBack) {
  const ModelFile m = gguf_model_with(test::make_temp_dir(), std::nullopt);
  auto t = load_chat_template(m, "llama-3");
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(*t->render(kSystemUser, {true, "B", "E"}), render_builtin("llama-3", kSystemUser, {true, "B", "E"}));
  const auto bad = load_chat_template(m, "nope");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

TEST(LoadChatTemplate, GgufTemplateWithSyntaxErrorIsAnError) {
  const ModelFile m = gguf_model_with(test::make_temp_dir(), "{% for %}");
  const auto t = load_chat_template(m);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("chat template line 1"), std::string::npos) << t.status().message();
}

ModelFile hf_folder_with(const std::string& dir, const json& tokenizer_config) {
  std::ofstream(dir + "/tokenizer_config.json") << tokenizer_config.dump();
  ModelFile m;
  m.format = ModelFormat::kHuggingFace;
  m.path = dir;
  return m;
}

TEST(LoadChatTemplate, FromHuggingFaceTokenizerConfig) {
  const std::string dir = test::make_temp_dir();
  auto t = load_chat_template(hf_folder_with(dir, {{"chat_template", "{{ messages[1].content }}!"}}));
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(*t->render(kSystemUser, {}), "Hi!");

  const json named = {{"chat_template", json::array({{{"name", "tool_use"}, {"template", "tools"}},
                                                     {{"name", "default"}, {"template", "default {{ messages | length }}"}}})}};
  t = load_chat_template(hf_folder_with(test::make_temp_dir(), named));
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(*t->render(kSystemUser, {}), "default 2");

  t = load_chat_template(hf_folder_with(test::make_temp_dir(), {{"bos_token", "<s>"}}), "chatml");
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(*t->render(kSystemUser, {false, "", ""}), render_builtin("chatml", kSystemUser, {false, "", ""}));
}

TEST(LoadChatTemplate, MalformedTokenizerConfigIsCorrupt) {
  const std::string dir = test::make_temp_dir();
  std::ofstream(dir + "/tokenizer_config.json") << "{\"chat_template\": ";
  ModelFile m;
  m.format = ModelFormat::kHuggingFace;
  m.path = dir;
  const auto t = load_chat_template(m);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.status().code(), ErrorCode::kCorruptFile);
}

}  // namespace
}  // namespace peregrine
