// SPDX-License-Identifier: Apache-2.0
// Sweep files, search spaces and the grid and random optimizers (issue #13).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <sstream>

#include "runtime/sweep/optimizer.hpp"
#include "runtime/sweep/space.hpp"
#include "runtime/sweep/sweep_spec.hpp"

using namespace monkey::sweep;

namespace {

const char* example = R"(name: lr-search
trial: {command: [python3, train.py, --lr, "{lr}", --hidden, "{hidden}"]}
space:
  lr: {type: loguniform, low: 1.0e-4, high: 1.0}
  hidden: {type: choice, values: [128, 256, 512]}
  optimizer: {type: choice, values: [sgd, adam]}
  momentum: {type: uniform, low: 0, high: 0.99, when: {optimizer: sgd}}
  layers: {type: int, low: 1, high: 4}
metric: {name: accuracy, goal: maximize}
algorithm: {name: asha, seed: 7, reduction_factor: 3, grace: 1, max_t: 9, resource: epoch}
budget: {trials: 60, wall: 30m}
parallel: 4
)";

std::string error_of(const std::string& text) {
  auto s = parse_sweep_text(text, "s.yaml");
  return s ? std::string("(parsed)") : s.error();
}

} // namespace

TEST_CASE("a sweep file: the trial, the space in order, the metric, the algorithm and the "
          "budget", "[runtime][sweep]") {
  auto s = parse_sweep_text(example, "s.yaml");
  REQUIRE(s);
  CHECK(s->name == "lr-search");
  CHECK(s->trial.command.size() == 6);
  REQUIRE(s->space.size() == 5);
  CHECK(s->space[0].name == "lr");
  CHECK(s->space[0].type == dist::loguniform);
  CHECK(s->space[0].low == 1e-4);
  CHECK(s->space[1].values == std::vector<std::string>{"128", "256", "512"});
  CHECK(s->space[3].when.at("optimizer") == std::vector<std::string>{"sgd"});
  CHECK(s->space[4].type == dist::integer);
  CHECK(s->metric.name == "accuracy");
  CHECK(s->metric.maximize);
  CHECK_FALSE(s->metric.best);
  CHECK(s->algorithm.name == "asha");
  CHECK(s->algorithm.seed == 7);
  CHECK(s->algorithm.resource == "epoch");
  CHECK(s->algorithm.get("reduction_factor", 0) == 3);
  CHECK(s->budget.trials == 60);
  CHECK(s->budget.wall_s == 1800);
  CHECK(s->budget.max_t == 9);
  CHECK(s->parallel == 4);
  CHECK(s->ship);
  CHECK(s->data.empty());
  auto app = parse_sweep_text(R"(trial: {app: fmnist, workers: 2, params: {epochs: 3}, cpus: 1}
space: {lr: {type: loguniform, low: 0.001, high: 0.5}}
metric: {name: test_accuracy, goal: maximize, use: best}
algorithm: {name: random}
budget: {trials: 8}
)", "a.yaml");
  REQUIRE(app);
  CHECK(app->trial.app == "fmnist");
  CHECK(app->trial.workers == 2);
  CHECK(app->trial.params.at("epochs") == "3");
  CHECK(app->metric.best);
}

TEST_CASE("a bad sweep file is refused naming the line and the field", "[runtime][sweep]") {
  auto base = std::string("trial: {command: [./t, \"{x}\"]}\n"
                          "metric: {name: acc, goal: maximize}\n"
                          "budget: {trials: 4}\n");
  auto with = [&](const std::string& space, const std::string& algo = "algorithm: {name: random}\n") {
    return error_of(base + algo + "space:\n" + space);
  };
  CHECK(with("  x: {type: gaussian, low: 0, high: 1}\n")
        == "s.yaml:6:13: space.x.type: unknown type 'gaussian' (uniform, loguniform, int, choice or grid)");
  CHECK_THAT(with("  x: {type: loguniform, low: 0, high: 1}\n"),
             Catch::Contains("s.yaml:6:6: space.x.low: loguniform needs low > 0"));
  CHECK_THAT(with("  x: {type: uniform, low: 2, high: 1}\n"),
             Catch::Contains("space.x: low 2 is above high 1"));
  CHECK_THAT(with("  x: {type: uniform, low: 0}\n"), Catch::Contains("space.x: uniform needs low and high"));
  CHECK_THAT(with("  x: {type: choice}\n"), Catch::Contains("space.x: choice needs values"));
  CHECK_THAT(with("  x: {type: int, low: 0.5, high: 3}\n"), Catch::Contains("int needs whole low and high"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1, step: 2}\n"),
             Catch::Contains("s.yaml:6:39: space.x.step: unknown field"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1, when: {opt: sgd}}\n"),
             Catch::Contains("'opt' is not a parameter declared before x"));
  CHECK_THAT(with("  opt: {type: choice, values: [sgd]}\n  x: {type: uniform, low: 0, high: 1, when: {opt: adam}}\n"),
             Catch::Contains("s.yaml:7:51: space.x.when.opt: 'adam' is not one of opt's values (sgd)"));
  CHECK_THAT(with("  y: {type: uniform, low: 0, high: 1}\n"),
             Catch::Contains("trial.command: the placeholder {x} names no parameter"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1}\n", "algorithm: {name: grid}\n"),
             Catch::Contains("space.x: algorithm grid needs values for every parameter; this one is uniform"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1}\n", "algorithm: {name: bayes}\n"),
             Catch::Contains("s.yaml:4:19: algorithm.name: unknown algorithm 'bayes'"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1}\n", "algorithm: {name: tpe, gama: 0.2}\n"),
             Catch::Contains("algorithm.gama: not a setting of tpe (known: name, seed, startup, candidates, gamma)"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1}\n", "algorithm: {name: tpe, gamma: 2}\n"),
             Catch::Contains("algorithm.gamma: must be between 0 and 1"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1}\n", "algorithm: {name: asha}\n"),
             Catch::Contains("budget.max_t: missing: asha needs the most steps a trial gets"));
  CHECK_THAT(error_of("trial: {command: [./t]}\nspace: {x: {type: uniform, low: 0, high: 1}}\n"
                      "metric: {name: acc, goal: most}\n"),
             Catch::Contains("s.yaml:3:27: metric.goal: maximize or minimize, not 'most'"));
  CHECK_THAT(error_of("trial: {command: [./t]}\nspace: {x: {type: uniform, low: 0, high: 1}}\n"
                      "metric: {name: acc}\nalgorithm: {name: random}\n"),
             Catch::Contains("budget.trials: missing: how many trials random runs"));
  CHECK_THAT(error_of("trial: {command: [./t]}\nmetric: {name: acc}\n"),
             Catch::Contains("space: missing"));
  CHECK_THAT(error_of("trial: {command: [./t], app: x}\nspace: {x: {type: uniform, low: 0, high: 1}}\nmetric: {name: a}\n"),
             Catch::Contains("trial: a command or an app, not both"));
  CHECK_THAT(error_of("trial: [oops\n"), Catch::Contains("s.yaml:2:1: syntax:"));
  CHECK_THAT(error_of("trials: 3\n"), Catch::Contains("s.yaml:1:1: trials: unknown field (known: name, trial"));
  CHECK_THAT(parse_sweep_file("/nonexistent/s.yaml").error(), Catch::Contains("cannot open the sweep file"));
  CHECK_THAT(with("  x: {type: uniform, low: 0, high: 1}\n", "ship: false\ndata: [d]\n"),
             Catch::Contains("s.yaml:5:7: data: ship: false says the nodes share the paths"));
  CHECK_THAT(error_of("trial: {app: fmnist}\nspace: {x: {type: uniform, low: 0, high: 1}}\n"
                      "metric: {name: acc}\nbudget: {trials: 2}\ndata: d\n"),
             Catch::Contains("s.yaml:5:7: data: app trials ship nothing"));
}

TEST_CASE("every mistake of a sweep file in one run, in the file's order", "[runtime][sweep]") {
  auto e = error_of("trial: {command: [./t, \"{x}\"], cpus: many}\n"
                    "space:\n"
                    "  x: {type: gaussian, low: 0, high: 1}\n"
                    "  y: {type: uniform, low: 0, high: 1, step: 2}\n"
                    "metric: {name: acc, goal: up}\n"
                    "algorithm: {name: tpe, gama: 0.2}\n"
                    "budget: {trials: 4, wall: soon}\n"
                    "paralel: 4\n");
  std::vector<std::string> lines;
  std::stringstream ss(e);
  for (std::string l; std::getline(ss, l);)
    lines.push_back(l);
  REQUIRE(lines.size() == 8);
  CHECK_THAT(lines[0], Catch::StartsWith("s.yaml:1:38: trial.cpus: expected an integer"));
  CHECK_THAT(lines[1], Catch::StartsWith("s.yaml:3:13: space.x.type: unknown type 'gaussian'"));
  CHECK_THAT(lines[2], Catch::StartsWith("s.yaml:4:39: space.y.step: unknown field"));
  CHECK_THAT(lines[3], Catch::StartsWith("s.yaml:5:27: metric.goal: maximize or minimize"));
  CHECK_THAT(lines[4], Catch::StartsWith("s.yaml:6:24: algorithm.gama: not a setting of tpe"));
  CHECK_THAT(lines[5], Catch::StartsWith("s.yaml:7:27: budget.wall:"));
  CHECK_THAT(lines[6], Catch::StartsWith("s.yaml:8:1: paralel: unknown field"));
  CHECK(lines[7] == "7 problems");
  // A parameter whose type is wrong gets that one problem, not also its type's rules.
  CHECK(error_of("trial: {command: [./t, \"{x}\"]}\nspace:\n  x: {type: pick, values: [a]}\n"
                 "metric: {name: acc}\nbudget: {trials: 2}\n")
        == "s.yaml:3:13: space.x.type: unknown type 'pick' (uniform, loguniform, int, choice or "
           "grid)");
  // The rules between fields point at the field, not at 1:1.
  CHECK_THAT(error_of("trial: {command: [./t, \"{z}\"]}\nspace: {x: {type: uniform, low: 0, "
                      "high: 1}}\nmetric: {name: acc}\nbudget: {trials: 2}\n"),
             Catch::StartsWith("s.yaml:1:18: trial.command: the placeholder {z}"));
}

TEST_CASE("drawing from a space: seeded, in range, conditional parameters only where they "
          "apply", "[runtime][sweep]") {
  auto s = parse_sweep_text(example, "s.yaml");
  REQUIRE(s);
  rng a{1}, b{1}, c{2};
  std::vector<double> lrs;
  std::set<std::string> layers, hidden;
  int sgd = 0, with_momentum = 0;
  for (int k = 0; k < 2000; ++k) {
    auto p = sample(s->space, a);
    CHECK(p == sample(s->space, b)); // the same seed: the same points
    double lr = std::stod(p.at("lr"));
    CHECK(lr >= 1e-4);
    CHECK(lr <= 1.0);
    lrs.push_back(lr);
    layers.insert(p.at("layers"));
    hidden.insert(p.at("hidden"));
    bool is_sgd = p.at("optimizer") == "sgd";
    sgd += is_sgd;
    with_momentum += p.count("momentum") ? 1 : 0;
    CHECK(p.count("momentum") == (is_sgd ? 1u : 0u));
    if (is_sgd) {
      double m = std::stod(p.at("momentum"));
      CHECK(m >= 0);
      CHECK(m <= 0.99);
    }
  }
  CHECK(sample(s->space, c) != sample(s->space, a)); // another seed, other points
  CHECK(layers == std::set<std::string>{"1", "2", "3", "4"}); // both ends of an int
  CHECK(hidden.size() == 3);
  CHECK(sgd == with_momentum);
  CHECK(sgd > 850);
  CHECK(sgd < 1150);
  // loguniform: as many points in each decade (about 500 of 2000 in each of the 4).
  int below_1e2 = 0;
  for (double lr : lrs)
    below_1e2 += lr < 1e-2;
  CHECK(below_1e2 > 850);
  CHECK(below_1e2 < 1150);
  // A float's text reads back to the same number.
  for (double v : {0.1, 1e-4, 0.123456789012345, 3.0, 2.5e-7})
    CHECK(std::stod(value_text(v)) == v);
  CHECK(value_text(0.1) == "0.1");
}

TEST_CASE("the grid: every point in order, conditional parameters where they apply, a "
          "limit", "[runtime][sweep]") {
  auto s = parse_sweep_text(R"(trial: {command: [./t, "{opt}", "{m}"]}
space:
  opt: {type: grid, values: [sgd, adam]}
  m: {type: grid, values: ["0.5", "0.9"], when: {opt: sgd}}
  bs: {type: choice, values: [32, 64]}
metric: {name: acc}
algorithm: {name: grid}
)", "g.yaml");
  REQUIRE(s);
  auto points = grid_points(s->space);
  REQUIRE(points);
  REQUIRE(points->size() == 6); // sgd×2×2 + adam×2
  CHECK(assignment_text((*points)[0]) == "bs=32 m=0.5 opt=sgd");
  CHECK(assignment_text((*points)[1]) == "bs=64 m=0.5 opt=sgd");
  CHECK(assignment_text((*points)[4]) == "bs=32 opt=adam");
  CHECK_THAT(grid_points(s->space, 5).error(), Catch::Contains("more than 5 points"));
  // Placeholders: the value, "" for an absent one, other braces kept.
  std::vector<std::string> names = {"opt", "m", "bs"};
  CHECK(fill({"./t", "--opt={opt}", "{m}", "{\"k\": 1}"}, (*points)[4], names)
        == std::vector<std::string>{"./t", "--opt=adam", "", "{\"k\": 1}"});
}

TEST_CASE("grid and random optimizers: deterministic, and their saved state goes on where "
          "it was", "[runtime][sweep]") {
  auto g = parse_sweep_text(R"(trial: {command: [./t, "{a}"]}
space: {a: {type: grid, values: [1, 2, 3]}}
metric: {name: acc}
algorithm: {name: grid}
)", "g.yaml");
  REQUIRE(g);
  auto grid = make_optimizer(*g);
  REQUIRE(grid);
  CHECK((*grid)->suggest().params.at("a") == "1");
  auto saved = (*grid)->save();
  CHECK((*grid)->suggest().params.at("a") == "2");
  auto again = make_optimizer(*g);
  REQUIRE((*again)->restore(saved));
  CHECK((*again)->suggest().params.at("a") == "2");
  CHECK((*again)->suggest().params.at("a") == "3");
  CHECK((*again)->suggest().what == suggestion::done);
  CHECK_FALSE((*again)->restore("{\"next\": \"x\"}"));

  auto s = parse_sweep_text(example, "s.yaml");
  REQUIRE(s);
  s->algorithm.name = "random";
  auto r1 = make_optimizer(*s), r2 = make_optimizer(*s);
  REQUIRE(r1);
  for (int k = 0; k < 5; ++k)
    CHECK((*r1)->suggest().params == (*r2)->suggest().params);
  auto state = (*r1)->save();
  auto next = (*r1)->suggest().params;
  auto r3 = make_optimizer(*s);
  REQUIRE((*r3)->restore(state));
  CHECK((*r3)->suggest().params == next);
  CHECK((*r3)->observe(0, 1, 0.5) == verdict::go_on);
  s->algorithm.seed = 8;
  auto other = make_optimizer(*s);
  CHECK((*other)->suggest().params != (*r2)->suggest().params);
  s->algorithm.name = "bayes"; // the parser refuses it first; the factory too
  CHECK_THAT(make_optimizer(*s).error(), Catch::Contains("algorithm bayes is not known"));
}

namespace {

sweep_spec asha_spec(const std::string& algo, bool maximize = true) {
  auto s = parse_sweep_text(std::string("trial: {command: [./t, \"{x}\"]}\n"
                                        "space: {x: {type: uniform, low: 0, high: 1}}\n"
                                        "metric: {name: acc, goal: ")
                              + (maximize ? "maximize" : "minimize") + "}\n"
                              + "algorithm: {name: " + algo
                              + ", seed: 1, reduction_factor: 3, grace: 1, max_t: 9}\n"
                                "budget: {trials: 20}\n",
                            "a.yaml");
  REQUIRE(s);
  return *s;
}

} // namespace

TEST_CASE("ASHA on scripted learning curves: the trials stopped at each rung", "[runtime][sweep]") {
  // η = 3, grace 1, max_t 9: rungs at 1 and 3. A trial below the 2/3 quantile of the values
  // recorded at a rung before it stops there.
  auto o = make_optimizer(asha_spec("asha"));
  REQUIRE(o);
  auto& a = **o;
  CHECK(a.suggest().what == suggestion::trial);
  CHECK(a.observe(0, 1, 0.50) == verdict::go_on); // the first at rung 1
  CHECK(a.observe(0, 2, 0.55) == verdict::go_on); // between rungs: nothing to decide
  CHECK(a.observe(0, 3, 0.60) == verdict::go_on); // the first at rung 3
  CHECK(a.observe(1, 1, 0.40) == verdict::stop);  // below 0.5
  CHECK(a.observe(2, 1, 0.70) == verdict::go_on); // above the 2/3 quantile of {0.4, 0.5}: 0.467
  CHECK(a.observe(2, 3, 0.65) == verdict::go_on); // above 0.6
  auto saved = a.save();
  CHECK(a.observe(3, 1, 0.45) == verdict::stop);  // below 0.567 ({0.4, 0.5, 0.7})
  CHECK(a.observe(4, 1, 0.60) == verdict::go_on); // 0.5 ({0.4, 0.45, 0.5, 0.7})
  CHECK(a.observe(4, 3, 0.55) == verdict::stop);  // below 0.633 ({0.6, 0.65})
  // A trial that first reports past rung 3 is judged there only, once.
  CHECK(a.observe(5, 4, 0.61) == verdict::stop);  // below 0.617 ({0.55, 0.6, 0.65})
  CHECK(a.observe(5, 5, 0.99) == verdict::go_on); // rung 3 already recorded it
  CHECK(a.observe(6, 8, 0.90) == verdict::go_on);
  CHECK(a.observe(7, 2, std::nan("")) == verdict::stop); // a NaN never goes on
  // The saved state gives the same decisions from where it was.
  auto again = make_optimizer(asha_spec("asha"));
  REQUIRE((*again)->restore(saved));
  CHECK((*again)->observe(3, 1, 0.45) == verdict::stop);
  CHECK((*again)->observe(4, 1, 0.60) == verdict::go_on);
  CHECK((*again)->observe(4, 3, 0.55) == verdict::stop);
  CHECK_FALSE((*again)->restore("{\"rng\": 1, \"brackets\": []}"));
  // minimize: the same curves negated stop the same trials.
  auto m = make_optimizer(asha_spec("asha", false));
  CHECK((*m)->observe(0, 1, -0.50) == verdict::go_on);
  CHECK((*m)->observe(1, 1, -0.40) == verdict::stop);
  CHECK((*m)->observe(2, 1, -0.70) == verdict::go_on);
}

TEST_CASE("Hyperband: trials go to the brackets in turn, each with its own first rung",
          "[runtime][sweep]") {
  // max_t 9, grace 1, η 3: brackets with rungs {1, 3} and {3}.
  auto o = make_optimizer(asha_spec("hyperband"));
  REQUIRE(o);
  auto& h = **o;
  CHECK(h.observe(0, 1, 0.5) == verdict::go_on);
  CHECK(h.observe(2, 1, 0.1) == verdict::stop);  // bracket 0: below 0.5 at rung 1
  CHECK(h.observe(1, 1, 0.1) == verdict::go_on); // bracket 1 has no rung at 1
  CHECK(h.observe(3, 1, 0.05) == verdict::go_on);
  CHECK(h.observe(1, 3, 0.3) == verdict::go_on); // bracket 1's first at rung 3
  CHECK(h.observe(3, 3, 0.2) == verdict::stop);
  auto big = asha_spec("asha");
  big.algorithm.settings["grace"] = 9;
  CHECK_THAT(make_optimizer(big).error(), Catch::Contains("grace 9 is not below max_t 9"));
}

namespace {

sweep_spec tpe_spec(uint64_t seed, const std::string& algo = "tpe") {
  auto s = parse_sweep_text("trial: {command: [./t, \"{x}\"]}\n"
                            "space:\n"
                            "  x: {type: uniform, low: 0, high: 1}\n"
                            "  lr: {type: loguniform, low: 1.0e-4, high: 1}\n"
                            "  kind: {type: choice, values: [a, b, c, d]}\n"
                            "metric: {name: loss, goal: minimize}\n"
                            "algorithm: {name: " + algo + ", seed: " + std::to_string(seed)
                              + "}\nbudget: {trials: 60}\n",
                            "t.yaml");
  REQUIRE(s);
  return *s;
}

/// A loss with its minimum at x = 0.3, lr = 0.01, kind = c.
double loss_of(const assignment& a) {
  double x = std::stod(a.at("x")), lr = std::log10(std::stod(a.at("lr")));
  return (x - 0.3) * (x - 0.3) + 0.05 * (lr + 2) * (lr + 2) + (a.at("kind") == "c" ? 0 : 0.3);
}

/// Runs `n` trials one after the other; the best loss, and the suggestions.
std::pair<double, std::vector<assignment>> run_sequential(optimizer& o, int n) {
  double best = HUGE_VAL;
  std::vector<assignment> seen;
  for (int k = 0; k < n; ++k) {
    auto next = o.suggest();
    REQUIRE(next.what == suggestion::trial);
    double l = loss_of(next.params);
    best = std::min(best, l);
    o.finish(k, l);
    seen.push_back(next.params);
  }
  return {best, seen};
}

} // namespace

TEST_CASE("TPE on a known objective: it beats random search and its suggestions gather at "
          "the optimum", "[runtime][sweep]") {
  int tpe_wins = 0;
  std::vector<double> tpe_best, random_best;
  for (uint64_t seed = 1; seed <= 7; ++seed) {
    auto t = make_optimizer(tpe_spec(seed));
    auto r = make_optimizer(tpe_spec(seed, "random"));
    REQUIRE(t);
    auto [tb, tseen] = run_sequential(**t, 60);
    auto [rb, rseen] = run_sequential(**r, 60);
    tpe_wins += tb < rb;
    tpe_best.push_back(tb);
    random_best.push_back(rb);
    // The last 20 suggestions: mostly the best kind, x near 0.3.
    int kind_c = 0, near = 0;
    for (size_t k = 40; k < 60; ++k) {
      kind_c += tseen[k].at("kind") == "c";
      near += std::abs(std::stod(tseen[k].at("x")) - 0.3) < 0.15;
    }
    CHECK(kind_c >= 12);
    CHECK(near >= 10);
  }
  std::sort(tpe_best.begin(), tpe_best.end());
  std::sort(random_best.begin(), random_best.end());
  CHECK(tpe_wins >= 5);
  CHECK(tpe_best[3] < random_best[3] / 2); // the medians
}

TEST_CASE("TPE: deterministic for a seed and an order of results, running trials count as "
          "bad ones, its saved state goes on where it was", "[runtime][sweep]") {
  auto a = make_optimizer(tpe_spec(3)), b = make_optimizer(tpe_spec(3));
  auto [ab, aseen] = run_sequential(**a, 20);
  auto [bb, bseen] = run_sequential(**b, 20);
  CHECK(aseen == bseen);
  CHECK(ab == bb);
  auto saved = (*a)->save();
  auto c = make_optimizer(tpe_spec(3));
  REQUIRE((*c)->restore(saved));
  auto from_a = (*a)->suggest().params, from_c = (*c)->suggest().params;
  CHECK(from_a == from_c);
  // Four suggestions in flight (parallel trials) are four different points.
  std::set<std::string> xs = {from_a.at("x")};
  for (int k = 0; k < 3; ++k)
    xs.insert((*a)->suggest().params.at("x"));
  CHECK(xs.size() == 4);
  // A failed trial is left out of the model; a bad state is refused.
  (*a)->finish(20, std::nullopt);
  CHECK((*a)->suggest().what == suggestion::trial);
  CHECK_FALSE((*c)->restore("{\"rng\": 1}"));
}

TEST_CASE("PBT on a scripted population: the bottom quantile exploits the top one, explored "
          "within the space", "[runtime][sweep]") {
  auto s = parse_sweep_text(R"(trial: {command: [./t, "{lr}", "{bs}", "{opt}"]}
space:
  lr: {type: loguniform, low: 1.0e-4, high: 1}
  bs: {type: int, low: 16, high: 256}
  opt: {type: choice, values: [sgd, momentum, adam]}
metric: {name: acc, goal: maximize}
algorithm: {name: pbt, seed: 5, population: 4, interval: 2, quantile: 0.25, resample: 0}
budget: {trials: 4, max_t: 10}
)", "p.yaml");
  REQUIRE(s);
  auto o = make_optimizer(*s);
  REQUIRE(o);
  auto& p = **o;
  std::vector<assignment> pop;
  for (int k = 0; k < 4; ++k)
    pop.push_back(p.suggest().params);
  CHECK(p.suggest().what == suggestion::wait); // the population is complete
  // Step 2: trial 3 is the worst, trial 1 the best (one member in each quarter of 4).
  CHECK(p.observe(0, 2, 0.50) == verdict::go_on); // alone: nobody to compare with
  CHECK(p.observe(1, 2, 0.90) == verdict::go_on);
  CHECK(p.observe(2, 2, 0.60) == verdict::go_on);
  auto d = p.observe(3, 2, 0.10);
  REQUIRE(d == verdict::exploit);
  CHECK(d.from == 1);
  // Explored: lr and bs multiplied by 0.8 or 1.2 (rounded, in range), opt moved one step.
  double ratio = std::stod(d.params.at("lr")) / std::stod(pop[1].at("lr"));
  CHECK((std::abs(ratio - 0.8) < 1e-4 || std::abs(ratio - 1.2) < 1e-4));
  auto bs = std::stoi(d.params.at("bs")), bs_from = std::stoi(pop[1].at("bs"));
  CHECK((bs == std::clamp(static_cast<int>(std::lround(bs_from * 0.8)), 16, 256)
         || bs == std::clamp(static_cast<int>(std::lround(bs_from * 1.2)), 16, 256)));
  std::vector<std::string> opts = {"sgd", "momentum", "adam"};
  auto k_from = std::find(opts.begin(), opts.end(), pop[1].at("opt")) - opts.begin();
  auto k_now = std::find(opts.begin(), opts.end(), d.params.at("opt")) - opts.begin();
  CHECK(std::abs(k_now - k_from) <= 1);
  // Not again before another interval; a member in the top goes on.
  CHECK(p.observe(3, 3, 0.05) == verdict::go_on);
  CHECK(p.observe(1, 4, 0.95) == verdict::go_on);
  // The same seed and results: the same decisions (and from the saved state).
  auto saved = p.save();
  auto q = make_optimizer(*s);
  for (int k = 0; k < 4; ++k)
    CHECK((*q)->suggest().params == pop[static_cast<size_t>(k)]);
  (*q)->observe(0, 2, 0.50);
  (*q)->observe(1, 2, 0.90);
  (*q)->observe(2, 2, 0.60);
  auto d2 = (*q)->observe(3, 2, 0.10);
  CHECK(d2.from == d.from);
  CHECK(d2.params == d.params);
  auto r = make_optimizer(*s);
  REQUIRE((*r)->restore(saved));
  CHECK((*r)->observe(0, 4, 0.01) == p.observe(0, 4, 0.01).what);
  // A failed member's place is drawn anew; when every member ended, PBT is done.
  p.finish(2, std::nullopt);
  CHECK(p.suggest().what == suggestion::trial);
  for (int64_t id : {0, 1, 3, 4})
    p.finish(id, 0.5);
  CHECK(p.suggest().what == suggestion::done);
}

namespace {
/// A PBT sweep of four members over one parameter.
sweep_spec pbt_of_four(int seed, int interval, int max_t) {
  auto s = parse_sweep_text("trial: {command: [./t, \"{lr}\"]}\n"
                            "space:\n  lr: {type: loguniform, low: 1.0e-4, high: 1}\n"
                            "metric: {name: acc}\n"
                            "algorithm: {name: pbt, seed: " + std::to_string(seed)
                              + ", population: 4, interval: " + std::to_string(interval)
                              + ", quantile: 0.25}\n"
                            "budget: {trials: 4, max_t: " + std::to_string(max_t) + "}\n",
                            "p.yaml");
  REQUIRE(s);
  return *s;
}
} // namespace

TEST_CASE("PBT judges a member against the others' values at the same step: two near-equal "
          "members a step apart do not shield each other",
          "[runtime][sweep]") {
  auto s = pbt_of_four(3, 3, 12);
  auto o = make_optimizer(s);
  REQUIRE(o);
  auto& p = **o;
  for (int k = 0; k < 4; ++k)
    p.suggest();
  // Scores grow by x per step: members 1 and 2 well ahead, 0 (x 0.41) and 3 (x 0.43) nearly
  // equal, 3 always half a step behind 0. Ranked by latest values, 0 at its step 3 sees 3's
  // step 2 (lower) and 3 at its step 3 sees 0's step 4 (higher): neither is ever the worst.
  // Judged at the same step, 0 is.
  double x[] = {0.41, 1.0, 0.53, 0.43};
  std::vector<std::pair<int64_t, int64_t>> exploited; // (member, step)
  auto feed = [&](int64_t id, int64_t step) {
    auto d = p.observe(id, step, x[id] * static_cast<double>(step));
    if (d == verdict::exploit) {
      CHECK((d.from == 1 || d.from == 2));
      exploited.push_back({id, step});
    }
  };
  for (int64_t k = 1; k <= 12; ++k) {
    feed(1, k);
    feed(2, k);
    feed(0, k);
    if (k > 1)
      feed(3, k - 1);
  }
  feed(3, 12);
  REQUIRE_FALSE(exploited.empty());
  // Judged at step 3 once member 3 got there (after 0's step 4): acted on at 0's step 5.
  CHECK(exploited.front() == std::pair<int64_t, int64_t>{0, 5});
  for (auto& e : exploited)
    CHECK(e.first == 0);
  // The state saved mid-wait goes on the same way.
  auto q = make_optimizer(s);
  for (int k = 0; k < 4; ++k)
    (*q)->suggest();
  (*q)->observe(3, 2, x[3] * 2);
  for (int64_t id : {1, 2, 0})
    CHECK((*q)->observe(id, 3, x[id] * 3) == verdict::go_on); // member 3 is not at 3 yet
  auto r = make_optimizer(s);
  REQUIRE((*r)->restore((*q)->save()));
  CHECK((*r)->observe(3, 3, x[3] * 3) == verdict::go_on);
  CHECK((*r)->observe(0, 4, x[0] * 4) == verdict::exploit);
}

TEST_CASE("PBT takes a member that continued from another as a donor only once its own job "
          "reported twice (its checkpoint must be there to copy)",
          "[runtime][sweep]") {
  auto s = pbt_of_four(5, 2, 20);
  auto o = make_optimizer(s);
  REQUIRE(o);
  auto& p = **o;
  for (int k = 0; k < 4; ++k)
    p.suggest();
  p.observe(0, 2, 0.5);
  p.observe(1, 2, 0.9);
  p.observe(2, 2, 0.6);
  REQUIRE(p.observe(3, 2, 0.1) == verdict::exploit); // 3 continues from 1's checkpoint
  // 3's new job reports once, far ahead of everyone; 0 is now the worst at step 4.
  CHECK(p.observe(3, 4, 6.0) == verdict::go_on);
  CHECK(p.observe(1, 4, 0.95) == verdict::go_on);
  CHECK(p.observe(2, 4, 0.65) == verdict::go_on);
  CHECK(p.observe(0, 4, 0.55) == verdict::go_on); // the only top member, 3, is too fresh
  for (int64_t id : {3, 1, 2, 0})
    CHECK(p.observe(id, 5, id == 3 ? 6.5 : 0.1 * static_cast<double>(id) + 0.6) == verdict::go_on);
  CHECK(p.observe(3, 6, 7.0) == verdict::go_on);
  CHECK(p.observe(1, 6, 1.0) == verdict::go_on);
  CHECK(p.observe(2, 6, 0.7) == verdict::go_on);
  auto d = p.observe(0, 6, 0.6); // 3 has reported twice since: a donor now
  REQUIRE(d == verdict::exploit);
  CHECK(d.from == 3);
}

TEST_CASE("PBT exploits no member at its last step (max_t): nothing would be left to run",
          "[runtime][sweep]") {
  auto s = parse_sweep_text(R"(trial: {command: [./t, "{lr}"]}
space:
  lr: {type: loguniform, low: 1.0e-4, high: 1}
metric: {name: acc}
algorithm: {name: pbt, seed: 1, population: 4, interval: 2, quantile: 0.25}
budget: {trials: 4, max_t: 10}
)", "p.yaml");
  REQUIRE(s);
  auto o = make_optimizer(*s);
  REQUIRE(o);
  auto& p = **o;
  for (int k = 0; k < 4; ++k)
    p.suggest();
  CHECK(p.observe(0, 10, 0.50) == verdict::go_on);
  CHECK(p.observe(1, 10, 0.90) == verdict::go_on);
  CHECK(p.observe(2, 10, 0.60) == verdict::go_on);
  CHECK(p.observe(3, 10, 0.10) == verdict::go_on); // the worst, but at max_t
  CHECK(p.observe(3, 8, 0.10) == verdict::exploit); // the same before it
}
