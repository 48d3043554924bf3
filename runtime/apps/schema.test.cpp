// SPDX-License-Identifier: Apache-2.0
#include "runtime/apps/schema.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

app_param param(std::string name, std::string type, std::string def, std::optional<double> min,
                std::optional<double> max, std::vector<std::string> values, std::string help) {
  app_param p;
  p.name = std::move(name);
  p.type = std::move(type);
  p.default_value = std::move(def);
  p.min = min;
  p.max = max;
  p.values = std::move(values);
  p.help = std::move(help);
  return p;
}

app_schema sample() {
  app_schema s;
  s.app = "hello";
  auto steps = param("steps", "int", "20", 1.0, 1000.0, {}, "steps");
  auto lr = param("lr", "float", "0.1", 0.0, 1.0, {}, "learning rate");
  auto mode = param("mode", "choice", "a", std::nullopt, std::nullopt, {"a", "b"}, "");
  auto fast = param("fast", "bool", "false", std::nullopt, std::nullopt, {}, "");
  s.params = {steps, lr, mode, fast};
  s.actors = {"pi_rank"};
  return s;
}

} // namespace

TEST_CASE("an app schema survives its JSON form", "[runtime][apps]") {
  auto s = sample();
  auto back = parse_app_schema(to_json(s));
  REQUIRE(back);
  CHECK(back->app == "hello");
  REQUIRE(back->params.size() == 4);
  CHECK(back->params[0].name == "steps");
  CHECK(back->params[0].max == 1000.0);
  CHECK(back->params[2].values == std::vector<std::string>{"a", "b"});
  CHECK(back->actors == std::vector<std::string>{"pi_rank"});
  CHECK(back->policy == "gang");
}

TEST_CASE("a malformed app description is refused with what is wrong", "[runtime][apps]") {
  CHECK_THAT(parse_app_schema("not json").error(), Catch::Contains("not a JSON object"));
  CHECK_THAT(parse_app_schema(R"({"description":"x"})").error(), Catch::Contains("malformed"));
  CHECK_THAT(parse_app_schema(R"({"app":"x","params":[{"name":"a","type":"matrix"}]})").error(),
             Catch::Contains("unknown type 'matrix'"));
  CHECK_THAT(parse_app_schema(R"({"app":"x","policy":"sometimes"})").error(),
             Catch::Contains("policy"));
}

TEST_CASE("a submit's --set values are checked against the schema, naming the field", "[runtime][apps]") {
  auto s = sample();
  CHECK(check_params(s, {{"steps", "5"}, {"lr", "0.5"}, {"mode", "b"}, {"fast", "true"}}));
  auto bad = [&](std::map<std::string, std::string> p) { return check_params(s, p).error(); };
  CHECK_THAT(bad({{"steps", "abc"}}), Catch::Contains("--set steps=abc") && Catch::Contains("integer"));
  CHECK_THAT(bad({{"steps", "5000"}}), Catch::Contains("above its maximum 1000"));
  CHECK_THAT(bad({{"steps", "0"}}), Catch::Contains("below its minimum 1"));
  CHECK_THAT(bad({{"steps", "2.5"}}), Catch::Contains("integer"));
  CHECK_THAT(bad({{"lr", "fast"}}), Catch::Contains("a number is expected"));
  CHECK_THAT(bad({{"mode", "c"}}), Catch::Contains("one of a, b"));
  CHECK_THAT(bad({{"fast", "yes"}}), Catch::Contains("true or false"));
  CHECK_THAT(bad({{"batch", "1"}}), Catch::Contains("no parameter 'batch'")
                                      && Catch::Contains("steps, lr, mode, fast"));
  // workers is a field of the job, never a parameter
  CHECK_THAT(bad({{"workers", "2"}}), Catch::Contains("use --workers 2"));
}

TEST_CASE("defaults fill the parameters a submit left out", "[runtime][apps]") {
  auto p = with_defaults(sample(), {{"steps", "7"}});
  CHECK(p.at("steps") == "7");
  CHECK(p.at("lr") == "0.1");
  CHECK(p.at("mode") == "a");
}

TEST_CASE("an app is found on the alive members, this node's build first", "[runtime][apps]") {
  auto node = [](std::string id, std::vector<app_entry> apps,
                 member_state state = member_state::alive) {
    member m;
    m.node = std::move(id);
    m.state = state;
    m.apps = std::move(apps);
    return m;
  };
  std::vector<member> ms{node("a", {{"hello", "b1", "{}"}}), node("b", {{"hello", "b2", "{}"}}),
                         node("c", {{"hello", "b2", "{}"}}),
                         node("d", {{"fmnist", "f1", "{}"}}, member_state::dead)};
  CHECK(find_app(ms, "hello", "a")->build == "b1"); // this node has it
  CHECK(find_app(ms, "hello", "x")->build == "b2"); // else the most common build
  CHECK(find_app(ms, "fmnist", "a") == nullptr);    // only a dead node has it
  CHECK(find_build(ms, "hello", "b2")->build == "b2");
  CHECK(find_build(ms, "hello", "b3") == nullptr);
  CHECK(find_build(ms, "fmnist", "f1") == nullptr);
  CHECK(known_apps(ms) == "hello");
  CHECK(known_apps({}) == "none");
  CHECK(app_tag("hello", "b1") == "app:hello@b1");
}

TEST_CASE("a string's pattern and a parameter that belongs with another's values",
          "[runtime][apps]") {
  app_schema s;
  s.app = "fmnist";
  auto strategy = param("strategy", "choice", "single", std::nullopt, std::nullopt,
                     {"single", "ps-async"}, "");
  auto hidden = param("hidden", "string", "512,256", std::nullopt, std::nullopt, {}, "");
  hidden.pattern = "[0-9]+(,[0-9]+)*";
  hidden.pattern_help = "widths separated by commas, e.g. 512,256";
  auto staleness = param("staleness", "int", "0", 0.0, 100.0, {}, "");
  staleness.only_with = "strategy";
  staleness.only_with_values = {"ps-async"};
  s.params = {strategy, hidden, staleness};
  auto back = parse_app_schema(to_json(s));
  REQUIRE(back);
  CHECK(back->params[1].pattern == hidden.pattern);
  CHECK(back->params[2].only_with_values == std::vector<std::string>{"ps-async"});
  CHECK(check_params(*back, {{"hidden", "128"}, {"strategy", "ps-async"}, {"staleness", "3"}}));
  CHECK_THAT(check_params(*back, {{"hidden", "abc"}}).error(),
             Catch::Contains("--set hidden=abc: hidden is of type string: widths separated by "
                             "commas, e.g. 512,256 is expected"));
  CHECK_THAT(check_params(*back, {{"hidden", "512,"}}).error(), Catch::Contains("hidden=512,:"));
  CHECK_THAT(check_params(*back, {{"staleness", "3"}}).error(),
             Catch::Contains("--set staleness=3: staleness applies only with strategy=ps-async "
                             "(here strategy=single)"));
  CHECK_THAT(parse_app_schema(R"({"app":"x","params":[{"name":"a","pattern":"(["}]})").error(),
             Catch::Contains("is not a regular expression"));
}

TEST_CASE("a parameter that adds ranks: counted when its condition holds, kept in the JSON "
          "form, an int only", "[runtime][apps]") {
  app_schema s;
  s.app = "fmnist";
  auto placement = param("ps_placement", "choice", "colocated", std::nullopt, std::nullopt,
                         {"colocated", "dedicated"}, "");
  auto servers = param("servers", "int", "1", 1.0, 256.0, {}, "");
  servers.adds_ranks = true;
  servers.ranks_when = "ps_placement";
  servers.ranks_when_values = {"dedicated"};
  s.params = {placement, servers};
  CHECK(extra_ranks(s, {}) == 0); // colocated by default
  CHECK(extra_ranks(s, {{"servers", "3"}}) == 0);
  CHECK(extra_ranks(s, {{"ps_placement", "dedicated"}}) == 1); // the default servers=1
  CHECK(extra_ranks(s, {{"ps_placement", "dedicated"}, {"servers", "3"}}) == 3);
  auto back = parse_app_schema(to_json(s));
  REQUIRE(back);
  CHECK(extra_ranks(*back, {{"ps_placement", "dedicated"}, {"servers", "2"}}) == 2);
  // Without a condition it always counts.
  s.params[1].ranks_when.clear();
  CHECK(extra_ranks(s, {{"servers", "4"}}) == 4);
  // Only an int can be a count of ranks.
  s.params[0].adds_ranks = true;
  auto bad = parse_app_schema(to_json(s));
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("ps_placement: adds ranks, so it must be an int"));
}
