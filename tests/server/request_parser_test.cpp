// The request parser: what it accepts, how it normalises, and that each problem names its field.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/request.h"

namespace imp::server {
namespace {

ApiError parse_error(const std::string& body) {
  try {
    parse_chat_request(body);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(RequestParser, ReadsEveryChatField) {
  const ChatRequest r = parse_chat_request(R"({"model":"m","messages":[{"role":"developer","content":"sys"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
    "stream":true,"stream_options":{"include_usage":true},"max_tokens":9,"max_completion_tokens":7,
    "temperature":0.5,"top_p":0.9,"top_k":-1,"min_p":0.1,"presence_penalty":1,"frequency_penalty":-1,"seed":-3,
    "stop":"x","logprobs":true,"top_logprobs":2,"chat_template_kwargs":{"enable_thinking":false},"n":1})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 1.0f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -1.0f);
  EXPECT_TRUE(r.has_seed);
  EXPECT_EQ(r.sampling.seed, static_cast<uint64_t>(-3));
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
}

TEST(RequestParser, DefaultsFollowOpenAI) {
  const ChatRequest r = parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"seed":null})");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FALSE(r.has_seed);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.tools.is_null());
}

TEST(RequestParser, ToolCallArgumentsBecomeObjectsForTemplates) {
  const ChatRequest r = parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"q"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
    {"role":"tool","tool_call_id":"c","content":"r"}]})");
  EXPECT_EQ(r.messages[1]["content"], "");
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"]["a"], 1);
}

TEST(RequestParser, ProblemsNameTheirField) {
  EXPECT_EQ(parse_error(R"({"model":"m","messages":[{"role":"user","content":"x"}],"top_k":"5"})").param, "top_k");
  EXPECT_EQ(parse_error(R"({"model":"m","messages":[{"role":"user"}]})").param, "messages[0].content");
  EXPECT_EQ(parse_error(R"({"model":"m","messages":[{"role":"assistant"}]})").param, "messages[0].content");
  EXPECT_EQ(parse_error(R"({"model":"m","messages":[{"role":"user","content":"x","tool_calls":[]}]})").param,
            "messages[0].tool_calls");
  EXPECT_EQ(parse_error(R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":1e400})").status, 400);
  EXPECT_EQ(parse_error(R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})").param,
            "max_tokens");
  const ApiError utf8 = parse_error("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\x28\"}]}");
  EXPECT_NE(std::string(utf8.what()).find("UTF-8"), std::string::npos);
  EXPECT_EQ(parse_error(std::string(100, '[')).status, 400);
}

TEST(RequestParser, Completions) {
  const CompletionRequest text = parse_completion_request(R"({"model":"m","prompt":["hello"],"logprobs":3})");
  EXPECT_EQ(text.prompt, "hello");
  EXPECT_FALSE(text.prompt_is_tokens);
  EXPECT_EQ(text.max_tokens, 16);
  EXPECT_EQ(text.logprobs, 3);
  const CompletionRequest ids = parse_completion_request(R"({"model":"m","prompt":[1,2,3]})");
  EXPECT_TRUE(ids.prompt_is_tokens);
  EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_THROW(parse_completion_request(R"({"model":"m","prompt":[-1]})"), ApiError);
  EXPECT_THROW(parse_completion_request(R"({"model":"m","prompt":""})"), ApiError);
}

}  // namespace
}  // namespace imp::server
