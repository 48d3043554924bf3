// SPDX-License-Identifier: Apache-2.0
#include "runtime/sweep/optimizer.hpp"

#include <algorithm>
#include <map>
#include <limits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace monkey::sweep {

namespace {

using json = nlohmann::json;

/// Every point of the grid, in order.
class grid_search final : public optimizer {
public:
  explicit grid_search(std::vector<assignment> points) : points_(std::move(points)) {}
  suggestion suggest() override {
    if (next_ >= points_.size())
      return {suggestion::done, {}};
    return {suggestion::trial, points_[next_++]};
  }
  decision observe(int64_t, int64_t, double) override { return verdict::go_on; }
  void finish(int64_t, std::optional<double>) override {}
  std::string save() const override { return json{{"next", next_}}.dump(); }
  status restore(const std::string& state) override {
    auto j = json::parse(state, nullptr, false);
    if (j.is_discarded() || !j.contains("next") || !j["next"].is_number_unsigned())
      return failure{"grid state: not {\"next\": N}"};
    next_ = j["next"].get<size_t>();
    return {};
  }

private:
  std::vector<assignment> points_;
  size_t next_ = 0;
};

/// Points drawn independently from the space (grid parameters drawn like choices).
class random_search final : public optimizer {
public:
  random_search(std::vector<param_space> space, uint64_t seed) : space_(std::move(space)) {
    g_.state = seed ^ 0x6A09E667F3BCC908ull;
  }
  suggestion suggest() override { return {suggestion::trial, sample(space_, g_)}; }
  decision observe(int64_t, int64_t, double) override { return verdict::go_on; }
  void finish(int64_t, std::optional<double>) override {}
  std::string save() const override { return json{{"rng", g_.state}}.dump(); }
  status restore(const std::string& state) override {
    auto j = json::parse(state, nullptr, false);
    if (j.is_discarded() || !j.contains("rng") || !j["rng"].is_number_unsigned())
      return failure{"random state: not {\"rng\": N}"};
    g_.state = j["rng"].get<uint64_t>();
    return {};
  }

private:
  std::vector<param_space> space_;
  rng g_;
};

/// Numpy's linear percentile of `v` (sorted here), p in [0, 100].
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  auto lo = static_cast<size_t>(std::floor(rank));
  auto hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

/// Asynchronous successive halving (Li et al., "A System for Massively Parallel
/// Hyperparameter Tuning", 2020), stopping-based as Ray Tune runs it, in `brackets`
/// brackets (1: ASHA; more: asynchronous Hyperband). Bracket b's rungs are at
/// grace·η^(b+k) < max_t. When a trial first reports at or past a rung's milestone (the
/// highest one it passed and has not been recorded at), its value is compared with the
/// values recorded at that rung before it: below their (1 − 1/η) quantile it stops, else it
/// goes on; either way its value is recorded there. Trials draw their parameters at random
/// (seeded) and go to the brackets in turn (trial n to bracket n mod brackets).
class successive_halving final : public optimizer {
public:
  successive_halving(std::vector<param_space> space, uint64_t seed, bool maximize, double eta,
                     double grace, double max_t, int brackets)
    : space_(std::move(space)), maximize_(maximize), eta_(eta) {
    g_.state = seed ^ 0xBB67AE8584CAA73Bull;
    for (int b = 0; b < brackets; ++b) {
      bracket br;
      for (double m = grace * std::pow(eta, b); m < max_t; m *= eta)
        br.rungs.push_back({static_cast<int64_t>(std::llround(m)), {}});
      brackets_.push_back(std::move(br));
    }
  }
  suggestion suggest() override { return {suggestion::trial, sample(space_, g_)}; }
  decision observe(int64_t id, int64_t step, double value) override {
    if (!std::isfinite(value))
      return verdict::stop;
    double v = maximize_ ? value : -value;
    auto& br = brackets_[static_cast<size_t>(id) % brackets_.size()];
    for (auto r = br.rungs.rbegin(); r != br.rungs.rend(); ++r) {
      if (step < r->milestone || r->recorded.count(id))
        continue;
      bool stop = false;
      if (!r->recorded.empty()) {
        std::vector<double> values;
        for (auto& [t, x] : r->recorded)
          values.push_back(x);
        stop = v < percentile(values, (1.0 - 1.0 / eta_) * 100.0);
      }
      r->recorded[id] = v;
      return stop ? verdict::stop : verdict::go_on;
    }
    return verdict::go_on;
  }
  void finish(int64_t, std::optional<double>) override {}
  std::string save() const override {
    json b = json::array();
    for (auto& br : brackets_) {
      json rungs = json::array();
      for (auto& r : br.rungs) {
        json rec = json::array();
        for (auto& [t, x] : r.recorded)
          rec.push_back({t, x});
        rungs.push_back({{"at", r.milestone}, {"recorded", rec}});
      }
      b.push_back(rungs);
    }
    return json{{"rng", g_.state}, {"brackets", b}}.dump();
  }
  status restore(const std::string& state) override {
    auto j = json::parse(state, nullptr, false);
    try {
      if (j.is_discarded() || j.at("brackets").size() != brackets_.size())
        return failure{"successive halving state: not this sweep's brackets"};
      g_.state = j.at("rng").get<uint64_t>();
      for (size_t b = 0; b < brackets_.size(); ++b) {
        auto& rungs = j.at("brackets")[b];
        if (rungs.size() != brackets_[b].rungs.size())
          return failure{"successive halving state: not this sweep's rungs"};
        for (size_t k = 0; k < rungs.size(); ++k) {
          auto& r = brackets_[b].rungs[k];
          r.recorded.clear();
          for (auto& e : rungs[k].at("recorded"))
            r.recorded[e.at(0).get<int64_t>()] = e.at(1).get<double>();
        }
      }
    } catch (const std::exception& e) {
      return failure{std::string("successive halving state: ") + e.what()};
    }
    return {};
  }

private:
  struct rung {
    int64_t milestone;
    std::map<int64_t, double> recorded; ///< trial → its value (larger is better)
  };
  struct bracket {
    std::vector<rung> rungs;
  };
  std::vector<param_space> space_;
  bool maximize_;
  double eta_;
  std::vector<bracket> brackets_;
  rng g_;
};


/// The tree-structured Parzen estimator (Bergstra et al., "Algorithms for Hyper-Parameter
/// Optimization", 2011), one parameter at a time as Optuna's default: after `startup`
/// random trials, the finished trials are split into the best `gamma` share ("good") and
/// the rest ("bad"); each parameter gets a Parzen density over each group (a Gaussian per
/// value, its width the larger gap to its sorted neighbours, clipped to [range/min(100,
/// n+1), range], plus a prior over the whole range; for choices the counts plus one each);
/// `candidates` points are drawn from the good densities and the one with the highest
/// l(x)/g(x) is suggested. Trials still running count as bad ones ("constant liar", as
/// Optuna does): parallel suggestions spread out instead of piling on one point.
class tpe_search final : public optimizer {
public:
  tpe_search(std::vector<param_space> space, uint64_t seed, bool maximize, int startup,
             int candidates, double gamma)
    : space_(std::move(space)), maximize_(maximize), startup_(startup),
      candidates_(candidates), gamma_(gamma) {
    g_.state = seed ^ 0x3C6EF372FE94F82Bull;
  }

  suggestion suggest() override {
    std::vector<const record*> done;
    for (auto& t : trials_)
      if (t.state == finished)
        done.push_back(&t);
    assignment next;
    if (static_cast<int>(done.size()) < startup_) {
      next = sample(space_, g_);
    } else {
      std::stable_sort(done.begin(), done.end(),
                       [](const record* a, const record* b) { return a->score > b->score; });
      auto n_good = static_cast<size_t>(std::max(1.0, std::ceil(gamma_ * static_cast<double>(done.size()))));
      std::vector<const assignment*> good, bad;
      for (size_t i = 0; i < done.size(); ++i)
        (i < n_good ? good : bad).push_back(&done[i]->params);
      for (auto& t : trials_)
        if (t.state == running)
          bad.push_back(&t.params);
      double best = -HUGE_VAL;
      for (int c = 0; c < candidates_; ++c) {
        assignment cand;
        double score = 0;
        for (auto& p : space_) {
          if (!active(p, cand))
            continue;
          auto l = density(p, good), gd = density(p, bad);
          auto v = l.draw(g_);
          cand[p.name] = v.text;
          score += std::log(l.pdf(v.x)) - std::log(gd.pdf(v.x));
        }
        if (c == 0 || score > best) {
          best = score;
          next = std::move(cand);
        }
      }
    }
    trials_.push_back({next, running, 0});
    return {suggestion::trial, next};
  }

  decision observe(int64_t, int64_t, double) override { return verdict::go_on; }

  void adopt(int64_t id, const assignment& params) override {
    if (id >= 0 && static_cast<size_t>(id) < trials_.size())
      trials_[static_cast<size_t>(id)].params = params;
  }

  void finish(int64_t id, std::optional<double> value) override {
    if (id < 0 || static_cast<size_t>(id) >= trials_.size())
      return;
    auto& t = trials_[static_cast<size_t>(id)];
    if (value && std::isfinite(*value)) {
      t.state = finished;
      t.score = maximize_ ? *value : -*value;
    } else {
      t.state = failed;
    }
  }

  std::string save() const override {
    json t = json::array();
    for (auto& r : trials_)
      t.push_back({{"params", r.params}, {"state", r.state}, {"score", r.score}});
    return json{{"rng", g_.state}, {"trials", t}}.dump();
  }

  status restore(const std::string& state) override {
    auto j = json::parse(state, nullptr, false);
    try {
      if (j.is_discarded())
        return failure{"tpe state: not JSON"};
      std::vector<record> trials;
      for (auto& r : j.at("trials"))
        trials.push_back({r.at("params").get<assignment>(), r.at("state").get<int>(),
                          r.at("score").get<double>()});
      g_.state = j.at("rng").get<uint64_t>();
      trials_ = std::move(trials);
    } catch (const std::exception& e) {
      return failure{std::string("tpe state: ") + e.what()};
    }
    return {};
  }

private:
  enum { running = 0, finished = 1, failed = 2 };
  struct record {
    assignment params;
    int state = running;
    double score = 0; ///< larger is better
  };
  struct drawn {
    double x;         ///< where the density is evaluated (log scale for loguniform)
    std::string text; ///< the parameter's value
  };
  /// A Parzen density of one parameter over some trials' values.
  struct parzen {
    const param_space* p = nullptr;
    double lo = 0, hi = 0; ///< the range, in the density's scale
    std::vector<double> mu, sigma, weight;
    std::vector<double> prob; ///< choices

    static double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

    double pdf(double x) const {
      if (!prob.empty())
        return prob[static_cast<size_t>(x)];
      double total = 0, wsum = 0;
      for (size_t i = 0; i < mu.size(); ++i) {
        double mass = normal_cdf((hi - mu[i]) / sigma[i]) - normal_cdf((lo - mu[i]) / sigma[i]);
        double z = (x - mu[i]) / sigma[i];
        total += weight[i] * std::exp(-0.5 * z * z) / (sigma[i] * std::sqrt(2 * M_PI) * std::max(mass, 1e-12));
        wsum += weight[i];
      }
      return std::max(total / wsum, 1e-300);
    }

    drawn draw(rng& g) const {
      if (!prob.empty()) {
        double u = g.uniform(), acc = 0;
        size_t k = 0;
        for (; k + 1 < prob.size(); ++k) {
          acc += prob[k];
          if (u < acc)
            break;
        }
        return {static_cast<double>(k), p->values[k]};
      }
      double wsum = 0;
      for (double w : weight)
        wsum += w;
      double u = g.uniform() * wsum, acc = 0;
      size_t k = 0;
      for (; k + 1 < weight.size(); ++k) {
        acc += weight[k];
        if (u < acc)
          break;
      }
      double x = lo;
      for (int tries = 0; tries < 100; ++tries) { // a normal (Box-Muller) kept in range
        double u1 = std::max(g.uniform(), 1e-300), u2 = g.uniform();
        x = mu[k] + sigma[k] * std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
        if (x >= lo && x <= hi)
          break;
        x = std::clamp(x, lo, hi);
      }
      if (p->type == dist::loguniform) {
        double v = rounded(*p, std::exp(x));
        return {std::log(v), value_text(v)};
      }
      double v = rounded(*p, x);
      return {v, p->type == dist::integer ? std::to_string(static_cast<int64_t>(v)) : value_text(v)};
    }
  };

  static parzen density(const param_space& p, const std::vector<const assignment*>& trials) {
    parzen d;
    d.p = &p;
    std::vector<std::string> seen;
    for (auto* a : trials)
      if (auto it = a->find(p.name); it != a->end())
        seen.push_back(it->second);
    if (p.type == dist::choice || p.type == dist::grid) {
      d.prob.assign(p.values.size(), 1.0); // the prior: one each
      for (auto& v : seen)
        if (auto k = std::find(p.values.begin(), p.values.end(), v); k != p.values.end())
          d.prob[static_cast<size_t>(k - p.values.begin())] += 1.0;
      double total = 0;
      for (double w : d.prob)
        total += w;
      for (double& w : d.prob)
        w /= total;
      return d;
    }
    bool log = p.type == dist::loguniform;
    d.lo = log ? std::log(p.low) : p.low - (p.type == dist::integer ? 0.5 : 0.0);
    d.hi = log ? std::log(p.high) : p.high + (p.type == dist::integer ? 0.5 : 0.0);
    double range = std::max(d.hi - d.lo, 1e-12);
    std::vector<double> xs;
    for (auto& v : seen) {
      double x = std::strtod(v.c_str(), nullptr);
      xs.push_back(log ? std::log(std::max(x, p.low)) : x);
    }
    std::sort(xs.begin(), xs.end());
    double floor_sigma = range / std::min(100.0, static_cast<double>(xs.size()) + 1.0);
    for (size_t i = 0; i < xs.size(); ++i) {
      double left = i > 0 ? xs[i] - xs[i - 1] : xs[i] - d.lo;
      double right = i + 1 < xs.size() ? xs[i + 1] - xs[i] : d.hi - xs[i];
      d.mu.push_back(xs[i]);
      d.sigma.push_back(std::clamp(std::max(left, right), floor_sigma, range));
      d.weight.push_back(1.0);
    }
    d.mu.push_back((d.lo + d.hi) / 2); // the prior: the whole range
    d.sigma.push_back(range);
    d.weight.push_back(1.0);
    return d;
  }

  std::vector<param_space> space_;
  bool maximize_;
  int startup_, candidates_;
  double gamma_;
  std::vector<record> trials_; ///< by id: the n-th suggestion is trial n
  rng g_;
};


/// Population-based training (Jaderberg et al. 2017, as Ray Tune's PBT): `population`
/// trials drawn at random run side by side; every `interval` of its resource a trial's
/// latest value is ranked among the population's latest values. In the bottom `quantile`
/// it is told to **exploit**: continue from the newest checkpoint of a trial of the top
/// `quantile` (drawn at random) with that trial's parameters, **explored**: each parameter
/// drawn anew with probability `resample`, else a number multiplied by one of the `perturb`
/// factors (kept in range; an int rounded) and a choice moved to a neighbouring value.
/// No trial beyond the population is suggested; a failed one is replaced by a new draw.
class population_based final : public optimizer {
public:
  population_based(std::vector<param_space> space, uint64_t seed, bool maximize, int population,
                   double interval, double quantile, double resample, std::vector<double> perturb,
                   int64_t max_t)
    : space_(std::move(space)), maximize_(maximize), population_(population),
      interval_(interval), quantile_(quantile), resample_(resample), perturb_(std::move(perturb)),
      max_t_(max_t) {
    g_.state = seed ^ 0xA54FF53A5F1D36F1ull;
  }

  suggestion suggest() override {
    int running_now = 0, counted = 0; // a failed member's place is drawn anew
    for (auto& m : members_) {
      running_now += m.state == running;
      counted += m.state != failed;
    }
    if (counted >= population_)
      return {running_now > 0 ? suggestion::wait : suggestion::done, {}};
    auto params = sample(space_, g_);
    members_.push_back({params, running, 0, false, 0});
    return {suggestion::trial, params};
  }

  decision observe(int64_t id, int64_t step, double value) override {
    if (id < 0 || static_cast<size_t>(id) >= members_.size() || !std::isfinite(value))
      return verdict::go_on;
    auto& m = members_[static_cast<size_t>(id)];
    m.score = maximize_ ? value : -value;
    m.scored = true;
    m.latest = step;
    if (m.since_exploit >= 0)
      m.since_exploit += 1;
    m.history[step] = m.score;
    auto done = [&] {
      prune();
      return decision{verdict::go_on};
    };
    if (max_t_ > 0 && step >= max_t_) {
      m.pending = -1;
      return done(); // its last step: nothing left to continue
    }
    if (m.pending < 0 && static_cast<double>(step - m.last_ready) >= interval_) {
      m.pending = step; // judged at this step once the others have reached it
      m.last_ready = step;
    }
    if (m.pending < 0)
      return done();
    // Judged against the other members' values at the same step: a member behind is
    // waited for (up to one more interval: then its latest value counts), so two members a
    // step apart do not each see the other's older, lower value and shield each other.
    auto at = m.pending;
    bool waited_enough = static_cast<double>(step - at) >= interval_;
    for (size_t k = 0; k < members_.size(); ++k)
      if (static_cast<int64_t>(k) != id && members_[k].state == running && members_[k].scored
          && members_[k].latest < at && !waited_enough)
        return done();
    m.pending = -1;
    // The running members with a value, worst first (ties: the lower id first), by their
    // value at step `at` (the last one at or before it; else their first one).
    std::vector<std::pair<double, int64_t>> ranked;
    for (size_t k = 0; k < members_.size(); ++k)
      if (members_[k].state == running && members_[k].scored)
        ranked.push_back({value_at(members_[k], at), static_cast<int64_t>(k)});
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    auto cut = static_cast<size_t>(std::ceil(quantile_ * static_cast<double>(ranked.size())));
    if (ranked.size() < 2 || cut == 0 || cut * 2 > ranked.size())
      return done();
    auto place = std::find_if(ranked.begin(), ranked.end(),
                              [&](const auto& r) { return r.second == id; })
                 - ranked.begin();
    if (static_cast<size_t>(place) >= cut)
      return done(); // not in the bottom quantile
    // A donor's newest checkpoint is what the exploiting member goes on from: a member that
    // continued from another itself only counts once its own job reported twice (before,
    // its first checkpoint may not be saved yet, and a continuation would start afresh).
    std::vector<int64_t> donors;
    for (size_t k = ranked.size() - cut; k < ranked.size(); ++k) {
      auto& c = members_[static_cast<size_t>(ranked[k].second)];
      if (c.since_exploit < 0 || c.since_exploit >= 2)
        donors.push_back(ranked[k].second);
    }
    if (donors.empty())
      return done(); // judged again at its next interval
    auto from = donors[g_.below(donors.size())];
    decision d{verdict::exploit};
    d.from = from;
    d.params = explore(members_[static_cast<size_t>(from)].params);
    m.params = d.params;
    m.history.clear(); // it goes on from the donor's checkpoint: its own values are gone
    m.since_exploit = 0;
    prune();
    return d;
  }

  void finish(int64_t id, std::optional<double> value) override {
    if (id < 0 || static_cast<size_t>(id) >= members_.size())
      return;
    auto& m = members_[static_cast<size_t>(id)];
    m.state = value ? finished : failed;
  }

  void adopt(int64_t id, const assignment& params) override {
    if (id >= 0 && static_cast<size_t>(id) < members_.size())
      members_[static_cast<size_t>(id)].params = params;
  }

  std::string save() const override {
    json ms = json::array();
    for (auto& m : members_)
      ms.push_back({{"params", m.params}, {"state", m.state}, {"score", m.score},
                    {"scored", m.scored}, {"last", m.last_ready}, {"latest", m.latest},
                    {"pending", m.pending}, {"since_exploit", m.since_exploit},
                    {"history", json(std::vector<std::pair<int64_t, double>>(
                                  m.history.begin(), m.history.end()))}});
    return json{{"rng", g_.state}, {"members", ms}}.dump();
  }

  status restore(const std::string& state) override {
    auto j = json::parse(state, nullptr, false);
    try {
      if (j.is_discarded())
        return failure{"pbt state: not JSON"};
      std::vector<member> ms;
      for (auto& m : j.at("members")) {
        member one{m.at("params").get<assignment>(), m.at("state").get<int>(),
                   m.at("score").get<double>(), m.at("scored").get<bool>(),
                   m.at("last").get<int64_t>()};
        one.latest = m.value("latest", int64_t{-1}); // states saved before these fields
        one.pending = m.value("pending", int64_t{-1});
        one.since_exploit = m.value("since_exploit", int64_t{-1});
        if (m.contains("history"))
          for (auto& [step, v] : m.at("history").get<std::vector<std::pair<int64_t, double>>>())
            one.history[step] = v;
        ms.push_back(std::move(one));
      }
      g_.state = j.at("rng").get<uint64_t>();
      members_ = std::move(ms);
    } catch (const std::exception& e) {
      return failure{std::string("pbt state: ") + e.what()};
    }
    return {};
  }

private:
  enum { running = 0, finished = 1, failed = 2 };
  struct member {
    assignment params;
    int state = running;
    double score = 0; ///< its latest value, larger is better
    bool scored = false;
    int64_t last_ready = 0; ///< the step of its last exploit decision
    int64_t latest = -1;    ///< the step of its latest value
    int64_t pending = -1;   ///< the step it waits to be judged at (-1: none)
    std::map<int64_t, double> history; ///< its recent values by step (larger is better)
    int64_t since_exploit = -1; ///< points since it last continued from another (-1: never)
  };

  /// `m`'s value at step `at`: its last at or before it, else its first after it.
  static double value_at(const member& m, int64_t at) {
    if (m.history.empty())
      return m.score;
    auto it = m.history.upper_bound(at);
    return it == m.history.begin() ? it->second : std::prev(it)->second;
  }

  /// Drops values no judgment can ask for any more: those before the earliest step a
  /// running member may still be judged at (its pending step, or the latest value of the
  /// least advanced one less an interval), keeping the last one before it.
  void prune() {
    int64_t floor = std::numeric_limits<int64_t>::max();
    for (auto& m : members_)
      if (m.state == running && m.scored) {
        floor = std::min(floor, m.pending >= 0 ? m.pending : m.latest);
        floor = std::min(floor, m.latest - static_cast<int64_t>(std::ceil(interval_)));
      }
    for (auto& m : members_) {
      auto it = m.history.upper_bound(floor);
      if (it != m.history.begin())
        m.history.erase(m.history.begin(), std::prev(it));
    }
  }

  assignment explore(const assignment& from) {
    assignment out;
    for (auto& p : space_) {
      if (!active(p, out))
        continue;
      auto it = from.find(p.name);
      if (it == from.end() || g_.uniform() < resample_) {
        out[p.name] = draw(p, g_);
        continue;
      }
      double factor = perturb_[g_.below(perturb_.size())];
      switch (p.type) {
        case dist::uniform:
        case dist::loguniform:
          out[p.name] = value_text(rounded(p, std::strtod(it->second.c_str(), nullptr) * factor));
          break;
        case dist::integer:
          out[p.name] = std::to_string(static_cast<int64_t>(
            rounded(p, std::strtod(it->second.c_str(), nullptr) * factor)));
          break;
        case dist::choice:
        case dist::grid: {
          auto k = static_cast<size_t>(std::find(p.values.begin(), p.values.end(), it->second) - p.values.begin());
          if (k >= p.values.size())
            k = 0;
          if (factor > 1 && k + 1 < p.values.size())
            ++k;
          else if (factor < 1 && k > 0)
            --k;
          out[p.name] = p.values[k];
          break;
        }
      }
    }
    return out;
  }

  std::vector<param_space> space_;
  bool maximize_;
  int population_;
  double interval_, quantile_, resample_;
  std::vector<double> perturb_;
  int64_t max_t_ = 0; ///< a member at its last step is not exploited
  std::vector<member> members_; ///< by id
  rng g_;
};

} // namespace

expected<std::unique_ptr<optimizer>> make_optimizer(const sweep_spec& s) {
  const auto& name = s.algorithm.name;
  if (name == "grid") {
    auto points = grid_points(s.space);
    if (!points)
      return failure{points.error()};
    return std::unique_ptr<optimizer>(std::make_unique<grid_search>(std::move(*points)));
  }
  if (name == "random")
    return std::unique_ptr<optimizer>(std::make_unique<random_search>(s.space, s.algorithm.seed));
  if (name == "asha" || name == "hyperband") {
    double eta = s.algorithm.get("reduction_factor", 3);
    double grace = s.algorithm.get("grace", 1);
    auto max_t = static_cast<double>(s.budget.max_t);
    if (grace >= max_t)
      return failure{"grace " + value_text(grace) + " is not below max_t " + value_text(max_t)
                     + ": no rung to stop trials at"};
    int brackets = 1;
    if (name == "hyperband") {
      int most = static_cast<int>(std::floor(std::log(max_t / grace) / std::log(eta) + 1e-9));
      brackets = static_cast<int>(s.algorithm.get("brackets", std::max(1, most)));
      brackets = std::clamp(brackets, 1, std::max(1, most));
    }
    return std::unique_ptr<optimizer>(std::make_unique<successive_halving>(
      s.space, s.algorithm.seed, s.metric.maximize, eta, grace, max_t, brackets));
  }
  if (name == "tpe")
    return std::unique_ptr<optimizer>(std::make_unique<tpe_search>(
      s.space, s.algorithm.seed, s.metric.maximize,
      static_cast<int>(s.algorithm.get("startup", 10)),
      static_cast<int>(s.algorithm.get("candidates", 24)), s.algorithm.get("gamma", 0.25)));
  if (name == "pbt")
    return std::unique_ptr<optimizer>(std::make_unique<population_based>(
      s.space, s.algorithm.seed, s.metric.maximize,
      static_cast<int>(s.algorithm.get("population", std::max(2, s.parallel))),
      s.algorithm.get("interval", std::max<double>(1, static_cast<double>(s.budget.max_t) / 10)),
      s.algorithm.get("quantile", 0.25), s.algorithm.get("resample", 0.25),
      s.algorithm.perturb.empty() ? std::vector<double>{0.8, 1.2} : s.algorithm.perturb,
      s.budget.max_t));
  return failure{"algorithm " + name + " is not known (grid, random, tpe, asha, hyperband, pbt)"};
}

} // namespace monkey::sweep
