#include "peregrine/server/openai_prompt.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "server_test_util.h"

namespace peregrine {
namespace {

OpenAiRequest chat(std::vector<ChatMessage> messages) {
  OpenAiRequest r;
  r.endpoint = ApiEndpoint::kChatCompletions;
  r.messages = std::move(messages);
  return r;
}

TEST(OpenAiPrompt, CompletionPrompts) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  auto chatml = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(chatml);
  OpenAiRequest r;
  r.prompt_text = "Once upon a time";
  EXPECT_EQ(*prompt_tokens(r, *tok, *chatml, ToolCallFormat::kGeneric), tok->encode("Once upon a time", true));
  EXPECT_EQ(prompt_tokens(r, *tok, *chatml, ToolCallFormat::kGeneric)->front(), tok->bos_id());
  r.prompt_is_tokens = true;
  r.prompt_tokens = {1, 403, 407};
  EXPECT_EQ(*prompt_tokens(r, *tok, *chatml, ToolCallFormat::kGeneric), r.prompt_tokens);
}

TEST(OpenAiPrompt, TemplateBosTextBecomesTheBosIdOncePerOccurrence) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  auto llama2 = ChatTemplate::builtin("llama-2");
  ASSERT_TRUE(llama2);
  const auto req = chat({{"user", "Hi"}, {"assistant", "Hello."}, {"user", "Tell me a story."}});
  auto ids = prompt_tokens(req, *tok, *llama2, ToolCallFormat::kGeneric);
  ASSERT_TRUE(ids) << ids.status().message();
  // llama-2 writes bos_token before each user turn and eos_token after each assistant turn.
  EXPECT_EQ(ids->front(), tok->bos_id());
  EXPECT_EQ(std::count(ids->begin(), ids->end(), tok->bos_id()), 2);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), tok->eos_id()), 1);
  ChatTemplateInputs inputs{true, tok->piece(tok->bos_id()), tok->piece(tok->eos_id())};
  const std::string text = *llama2->render(req.messages, inputs);
  std::string without_specials = text;
  for (const std::string& piece : {inputs.bos_token, inputs.eos_token}) {
    for (auto at = without_specials.find(piece); at != std::string::npos; at = without_specials.find(piece)) {
      without_specials.erase(at, piece.size());
    }
  }
  EXPECT_EQ(tok->decode(*ids), without_specials);  // nothing spelled out as "<s>" text
}

TEST(OpenAiPrompt, TemplateWithoutBosGetsTheTokenizersDefault) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  auto chatml = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(chatml);
  auto ids = prompt_tokens(chat({{"system", "Be kind."}, {"user", "Hi"}}), *tok, *chatml, ToolCallFormat::kGeneric);
  ASSERT_TRUE(ids);
  ASSERT_TRUE(tok->add_bos_default());
  EXPECT_EQ(ids->front(), tok->bos_id());
  EXPECT_EQ(std::count(ids->begin(), ids->end(), tok->bos_id()), 1);
  EXPECT_EQ(tok->decode(*ids), "<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(OpenAiPrompt, AContinuedLastMessageEndsThePrompt) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  auto chatml = ChatTemplate::builtin("chatml");
  ASSERT_TRUE(chatml);
  OpenAiRequest r = chat({{"user", "Hi"}, {"assistant", "Whill"}});
  r.prompt_end = PromptEnd::kContinueLastMessage;
  auto ids = prompt_tokens(r, *tok, *chatml, ToolCallFormat::kGeneric);
  ASSERT_TRUE(ids) << ids.status().message();
  EXPECT_EQ(tok->decode(*ids), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nWhill");
  r.prompt_end = PromptEnd::kAfterLastMessage;
  EXPECT_EQ(tok->decode(*prompt_tokens(r, *tok, *chatml, ToolCallFormat::kGeneric)),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nWhill<|im_end|>\n");
}

TEST(OpenAiPrompt, TemplateErrorsAreInvalidArgument) {
  auto tok = test::stories_tokenizer();
  ASSERT_TRUE(tok);
  auto llama2 = ChatTemplate::builtin("llama-2");
  ASSERT_TRUE(llama2);
  auto ids = prompt_tokens(chat({{"user", "a"}, {"user", "b"}}), *tok, *llama2, ToolCallFormat::kGeneric);
  ASSERT_FALSE(ids);
  EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("alternate"), std::string::npos);
}

}  // namespace
}  // namespace peregrine
