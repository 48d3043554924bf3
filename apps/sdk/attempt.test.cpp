// SPDX-License-Identifier: Apache-2.0
#include <catch2/catch.hpp>

#include "monkey/sdk/attempt.hpp"
#include "monkey/sdk/version.hpp"

using namespace monkey::sdk;

TEST_CASE("sdk: the attempt context is read from the runtime's environment", "[sdk]") {
  context_error err;
  auto ctx = attempt_from({{"MONKEY_JOB_ID", "01ABC"},
                           {"MONKEY_ATTEMPT", "2"},
                           {"MONKEY_ATTEMPT_ID", "0240855e.1.3"},
                           {"MONKEY_SEED", "18446744073709551615"},
                           {"MONKEY_PARAM_BATCH_SIZE", "64"},
                           {"MONKEY_PARAM_LR", "0.1"},
                           {"PATH", "/bin"}},
                          &err);
  REQUIRE(ctx);
  CHECK(ctx->job_id == "01ABC");
  CHECK(ctx->attempt == 2);
  CHECK(ctx->attempt_id == "0240855e.1.3");
  CHECK(ctx->seed == 18446744073709551615ull);
  CHECK(ctx->array_index == -1);
  CHECK(ctx->param("batch-size") == std::optional<std::string>{"64"});
  CHECK(ctx->param("lr") == std::optional<std::string>{"0.1"});
  CHECK_FALSE(ctx->param("momentum"));
  CHECK(ctx->params.size() == 2);
}

TEST_CASE("sdk: outside a job, or with malformed numbers, the error names the variable",
          "[sdk]") {
  context_error err;
  CHECK_FALSE(attempt_from({{"PATH", "/bin"}}, &err));
  CHECK(err.what.find("MONKEY_JOB_ID") != std::string::npos);
  CHECK_FALSE(attempt_from({{"MONKEY_JOB_ID", "x"}, {"MONKEY_ATTEMPT", "two"}}, &err));
  CHECK(err.what == "MONKEY_ATTEMPT: not a number: 'two'");
  CHECK_FALSE(attempt_from({{"MONKEY_JOB_ID", "x"}, {"MONKEY_SEED", "-1"}}, &err));
  CHECK(err.what.find("MONKEY_SEED") != std::string::npos);
}

TEST_CASE("sdk: parameter names match the runtime's and the version is the project's",
          "[sdk]") {
  CHECK(param_env_name("batch-size") == "MONKEY_PARAM_BATCH_SIZE");
  CHECK(param_env_name("lr") == "MONKEY_PARAM_LR");
  CHECK(std::string(version()) == MONKEY_VERSION);
  CHECK(MONKEY_VERSION_MAJOR >= 0);
}
