#include "peregrine/server/api_error.h"

#include <gtest/gtest.h>

namespace peregrine {
namespace {

TEST(ApiError, StatusCodesMapToHttpStatusAndType) {
  struct Case {
    Status status;
    int http;
    const char* type;
  };
  const Case cases[] = {
      {invalid_argument("x"), 400, "invalid_request_error"},
      {out_of_range("x"), 400, "invalid_request_error"},
      {not_found("x"), 404, "invalid_request_error"},
      {resource_exhausted("x"), 429, "rate_limit_error"},
      {unavailable("x"), 503, "server_error"},
      {cancelled("x"), 503, "server_error"},
      {Status(ErrorCode::kInternal, "x"), 500, "server_error"},
  };
  for (const auto& c : cases) {
    const ApiError e = api_error(c.status, "p");
    EXPECT_EQ(e.http_status, c.http) << error_code_name(c.status.code());
    EXPECT_EQ(e.type, c.type);
    EXPECT_EQ(e.param, "p");
    EXPECT_EQ(e.message, "x");
  }
  EXPECT_EQ(api_error(out_of_range("long")).code, "context_length_exceeded");
  EXPECT_EQ(api_error(resource_exhausted("full")).code, "queue_full");
}

TEST(ApiError, JsonHasTheOpenAiShapeWithNulls) {
  const nlohmann::json j = api_error(invalid_argument("bad temperature"), "temperature").to_json();
  EXPECT_EQ(j, nlohmann::json::parse(R"({"error": {"message": "bad temperature", "type": "invalid_request_error",
                                        "param": "temperature", "code": null}})"));
  const nlohmann::json u = unauthorized_error().to_json();
  EXPECT_EQ(unauthorized_error().http_status, 401);
  EXPECT_EQ(u["error"]["type"], "authentication_error");
  EXPECT_TRUE(u["error"]["param"].is_null());
  EXPECT_EQ(u["error"]["code"], "invalid_api_key");
  const ApiError m = model_not_found_error("gpt-4");
  EXPECT_EQ(m.http_status, 404);
  EXPECT_EQ(m.code, "model_not_found");
  EXPECT_EQ(m.param, "model");
  EXPECT_EQ(http_error(404).code, "not_found");
  EXPECT_EQ(http_error(413).http_status, 413);
  EXPECT_EQ(http_error(413).type, "invalid_request_error");
  EXPECT_EQ(http_error(500).type, "server_error");
}

}  // namespace
}  // namespace peregrine
