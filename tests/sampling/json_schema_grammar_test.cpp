// JSON Schema → GBNF (sampling/json_schema_grammar.h): each schema's grammar takes JSON texts
// the schema accepts (as GPT-2 vocabulary tokens through the matcher) and refuses texts it does
// not; keywords outside the subset and malformed schemas are one error naming them.
#include "peregrine/sampling/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "peregrine/sampling/grammar.h"
#include "grammar_text.h"
#include "test_models.h"

namespace peregrine {
namespace {

using OJson = nlohmann::ordered_json;

struct Case {
  const char* schema;
  std::vector<const char*> valid, invalid;
};

TEST(JsonSchemaGrammar, GrammarsTakeWhatTheSchemaAcceptsAndRefuseTheRest) {
  const Tokenizer& tok = test::llamacpp_vocab("gpt-2");
  const auto trie = TokenTrie::of(tok);
  const Case cases[] = {
      {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name", "age"]})",
       {R"({"name": "Ada", "age": 36})", "{\n  \"name\": \"\\u00e9\\n\",\n  \"age\": -3\n}"},
       {R"({"age": 36, "name": "Ada"})", R"({"name": "Ada"})", R"({"name": "Ada", "age": 3.5})", R"({"name": 1, "age": 2})"}},
      {R"({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "null"}, "c": {"type": "number"}}})",
       {"{}", R"({"a": true})", R"({"b": null, "c": 1.5e3})", R"({"a": false, "b": null, "c": 0})"},
       {R"({"c": 1, "a": true})", R"({"a": true,})", R"({"d": 1})"}},
      {R"({"enum": ["red", 2, null, {"k": [1]}]})", {R"("red")", "2", "null", R"({"k":[1]})"}, {R"("blue")", "3", R"({"k": [1]})"}},
      {R"({"const": {"v": 1}})", {R"({"v":1})"}, {R"({"v":2})"}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
       {"[1, 2]", "[1,2,3]"}, {"[1]", "[1, 2, 3, 4]", "[1, \"a\"]", "[]"}},
      {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]})", {R"(["a", 1.5])"}, {R"([1.5, "a"])", R"(["a"])"}},
      {R"({"anyOf": [{"type": "string", "maxLength": 3}, {"type": "array", "maxItems": 0}]})",
       {R"("abc")", "[]", R"("")"}, {R"("abcd")", "[1]"}},
      {R"({"type": ["integer", "null"]})", {"7", "null"}, {"7.5", R"("7")"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"})",
       {"{}", R"({"next": {"next": {}}})"}, {R"({"next": 1})"}},
      {R"({"type": "string", "pattern": "^(ab|c)+-[0-9]{2}\\.[^a-z\"]$"})",
       {R"("abc-12.Z")", R"("c-00.\\")"}, {R"("ab-1.Z")", R"("abc-12.z")", R"("d-12.Z")", R"("c-00.\"")"}},
      {R"({"type": "string", "format": "date-time"})", {R"("2026-11-30T05:06:07Z")", R"("2026-11-30T05:06:07.25+01:00")"},
       {R"("2026-13-30T05:06:07Z")", R"("2026-11-30 05:06:07Z")"}},
      {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {R"({"type": "object", "additionalProperties": {"type": "integer"}})", {R"({"x": 1, "y": 2})", "{}"}, {R"({"x": "1"})"}},
      {R"({"type": "object", "properties": {}, "additionalProperties": false})", {"{}"}, {R"({"x": 1})"}},
      {R"({"title": "T", "description": "d", "type": "string", "minLength": 2, "maxLength": 3, "examples": ["ab"]})",
       {R"("ab")", R"("a\"c")"}, {R"("a")", R"("abcd")"}},
  };
  for (const Case& c : cases) {
    auto gbnf = json_schema_to_gbnf(OJson::parse(c.schema));
    ASSERT_TRUE(gbnf) << c.schema << ": " << gbnf.status().message();
    auto g = Grammar::parse(*gbnf);
    ASSERT_TRUE(g) << c.schema << ": " << g.status().message() << "\n" << *gbnf;
    for (const char* text : c.valid) {
      const test::TextRun r = test::run(tok, trie, *g, text);
      EXPECT_TRUE(r.accepted && r.complete) << c.schema << " should take " << text;
    }
    for (const char* text : c.invalid) {
      const test::TextRun r = test::run(tok, trie, *g, text);
      EXPECT_FALSE(r.accepted && r.complete) << c.schema << " should refuse " << text;
    }
  }
}

TEST(JsonSchemaGrammar, WhatItCannotFollowIsOneErrorNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "integer", "minimum": 0})", "'minimum' is not supported at #"},
      {R"({"properties": {"a": {"allOf": []}}})", "'allOf' is not supported at #/properties/a"},
      {R"({"$ref": "#/$defs/x"})", "resolves to nothing"},
      {R"({"$ref": "http://example.com/s.json"})", "only #/$defs/NAME"},
      {R"({"type": "thing"})", "the type 'thing'"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems / maxItems"},
      {R"({"type": "object", "properties": {"a": {}}, "required": "a"})", "'required'"},
      {R"({"type": "object", "properties": {}, "required": ["b"]})", "'b'"},
      {R"({"type": "string", "pattern": "a(b"})", "unclosed '('"},
      {R"({"type": "string", "pattern": "\\p{L}"})", "escape"},
      {R"(false)", "schema false"},
      {R"(3)", "not an object"},
      {R"({"enum": []})", "enum"},
      {R"({"type": "array", "minItems": "2"})", "'minItems' that is not an integer"},
      {R"({"type": "string", "maxLength": -1})", "'maxLength' that is not an integer"},
      {R"({"type": "string", "format": 5})", "format that is not a string"},
      {R"({"type": "string", "pattern": "a{2,x}"})", "quantifier"},
      {R"({"type": "string", "pattern": "a{5,2}"})", "quantifier"},
  };
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < 200; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  auto too_deep = json_schema_to_gbnf(OJson::parse(deep));
  ASSERT_FALSE(too_deep);
  EXPECT_NE(too_deep.status().message().find("nested more than 64"), std::string::npos);
  for (const auto& [schema, what] : cases) {
    auto gbnf = json_schema_to_gbnf(OJson::parse(schema));
    ASSERT_FALSE(gbnf) << schema;
    EXPECT_EQ(gbnf.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(gbnf.status().message().find(what), std::string::npos) << schema << " → " << gbnf.status().message();
  }
}

}  // namespace
}  // namespace peregrine
