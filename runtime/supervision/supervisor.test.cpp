// SPDX-License-Identifier: Apache-2.0
// Supervision on CAF's deterministic test scheduler: no threads, no sleeps; time moves
// only when the test advances it.

#include "runtime/supervision/supervisor.hpp"

#include <caf/all.hpp>
#include <catch2/catch.hpp>

#include "runtime/wire/atoms.hpp"

using namespace monkey;

namespace {

struct test_config : caf::actor_system_config {
  test_config() {
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
  }
};

struct fixture {
  test_config cfg;
  caf::actor_system sys{cfg};
  caf::scheduler::test_coordinator& sched
    = dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  caf::scoped_actor self{sys};
  std::map<std::string, int> starts;
  std::map<std::string, caf::actor> seen_sibling;
  std::vector<caf::actor> roots;

  ~fixture() {
    // The test scheduler runs nothing by itself: stop every tree before the system ends.
    for (auto& r : roots)
      caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
    sched.run();
  }

  child_spec child(const std::string& name, restart_policy p = restart_policy::permanent) {
    return {name,
            [this, name](caf::actor_system& s, const sibling_map& siblings) {
              ++starts[name];
              for (auto& [n, a] : siblings)
                seen_sibling[name + "<-" + n] = a;
              return s.spawn([](caf::event_based_actor* a) -> caf::behavior {
                return {[=](int x) {
                  if (x < 0)
                    a->quit(); // a normal exit
                  return x;
                }};
              });
            },
            p, false};
  }

  caf::actor which(const caf::actor& sup, const std::string& name) {
    self->send(sup, atoms::which::value, name);
    sched.run();
    caf::actor out;
    self->receive([&](caf::actor& a) { out = a; }, [&](caf::error&) {},
                  caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }

  tree_node tree(const caf::actor& sup) {
    self->send(sup, atoms::tree::value);
    sched.run();
    tree_node out;
    self->receive([&](std::string& body) { out = *decode<tree_node>(body, "tree"); },
                  caf::after(std::chrono::seconds(0)) >> [] {});
    return out;
  }

  /// True when `a` still answers a message (a stopped actor does not).
  bool answers(const caf::actor& a) {
    self->send(a, 1);
    sched.run();
    bool answered = false;
    self->receive([&](int) { answered = true; }, caf::after(std::chrono::seconds(0)) >> [] {});
    return answered;
  }

  void kill(const caf::actor& a) {
    caf::anon_send_exit(a, caf::exit_reason::kill);
    sched.run();
  }

  caf::actor start(restart_strategy how, std::vector<child_spec> children, size_t intensity = 3) {
    auto sup = spawn_supervisor(sys, "sup", {how, intensity, std::chrono::seconds(5)},
                                std::move(children));
    roots.push_back(sup);
    sched.run();
    return sup;
  }
};

} // namespace

TEST_CASE("children start in order and see the siblings before them",
          "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::one_for_one, {f.child("a"), f.child("b"), f.child("c")});
  CHECK(f.starts == std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}});
  CHECK(f.seen_sibling.count("b<-a") == 1);
  CHECK(f.seen_sibling.count("c<-b") == 1);
  CHECK(f.seen_sibling.count("a<-b") == 0);
  caf::anon_send_exit(sup, caf::exit_reason::user_shutdown);
  f.sched.run();
}

TEST_CASE("one_for_one restarts only the child that died", "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::one_for_one, {f.child("a"), f.child("b"), f.child("c")});
  auto a = f.which(sup, "a");
  auto b = f.which(sup, "b");
  f.kill(b);
  CHECK(f.starts == std::map<std::string, int>{{"a", 1}, {"b", 2}, {"c", 1}});
  CHECK(f.which(sup, "a") == a);
  CHECK(f.which(sup, "b") != b);
  auto t = f.tree(sup);
  REQUIRE(t.children.size() == 3);
  CHECK(t.children[1].name == "b");
  CHECK(t.children[1].restarts == 1);
  CHECK(t.children[0].restarts == 0);
  CHECK(t.kind == "supervisor (one_for_one)");
}

TEST_CASE("one_for_all restarts every child", "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::one_for_all, {f.child("a"), f.child("b"), f.child("c")});
  auto a = f.which(sup, "a");
  f.kill(f.which(sup, "b"));
  CHECK(f.starts == std::map<std::string, int>{{"a", 2}, {"b", 2}, {"c", 2}});
  CHECK(f.which(sup, "a") != a);
  // The old a was stopped, not left running beside the new one.
  CHECK_FALSE(f.answers(a));
}

TEST_CASE("rest_for_one restarts the child and those started after it",
          "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::rest_for_one, {f.child("a"), f.child("b"), f.child("c")});
  f.kill(f.which(sup, "b"));
  CHECK(f.starts == std::map<std::string, int>{{"a", 1}, {"b", 2}, {"c", 2}});
  // The restarted c sees the new b.
  CHECK(f.seen_sibling["c<-b"] == f.which(sup, "b"));
}

TEST_CASE("too many restarts within the period make the supervisor give up",
          "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::one_for_one, {f.child("a"), f.child("b")}, 2);
  f.self->monitor(sup);
  f.kill(f.which(sup, "a"));
  f.kill(f.which(sup, "a"));
  CHECK(f.starts["a"] == 3);
  auto b = f.which(sup, "b");
  f.kill(f.which(sup, "a")); // third restart within 5 s: over the intensity of 2
  caf::error reason;
  f.self->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  REQUIRE(reason);
  CHECK_THAT(caf::to_string(reason), Catch::Contains("gave up"));
  CHECK(f.starts["a"] == 3);
  // Its other children were stopped with it.
  CHECK_FALSE(f.answers(b));
}

TEST_CASE("restarts spread beyond the period are allowed", "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::one_for_one, {f.child("a")}, 2);
  for (int i = 0; i < 5; ++i) {
    f.kill(f.which(sup, "a"));
    f.sched.advance_time(std::chrono::seconds(3));
  }
  CHECK(f.starts["a"] == 6);
  CHECK(f.which(sup, "a"));
}

TEST_CASE("an escalation restarts the failed supervisor under its parent",
          "[runtime][supervisor]") {
  fixture f;
  auto inner = [&f](caf::actor_system& s, const sibling_map&) {
    ++f.starts["inner"];
    return spawn_supervisor(s, "inner", {restart_strategy::one_for_one, 1, std::chrono::seconds(5)},
                            {f.child("leaf")});
  };
  auto top = f.start(restart_strategy::one_for_one,
                     {{"inner", inner, restart_policy::permanent, true, true}});
  auto first_inner = f.which(top, "inner");
  f.kill(f.which(first_inner, "leaf"));
  f.kill(f.which(first_inner, "leaf")); // second restart in 5 s: inner gives up
  CHECK(f.starts["inner"] == 2);         // top restarted it
  CHECK(f.which(top, "inner") != first_inner);
  CHECK(f.starts["leaf"] == 3);          // 1 + 1 restart + the fresh inner's start
  auto t = f.tree(top);
  REQUIRE(t.children.size() == 1);
  CHECK(t.children[0].restarts == 1);
  REQUIRE(t.children[0].children.size() == 1);
  CHECK(t.children[0].children[0].name == "leaf");
  CHECK_THAT(render_tree(t), Catch::Contains("└── leaf"));
}

TEST_CASE("transient children restart only after abnormal exits, temporary never",
          "[runtime][supervisor]") {
  fixture f;
  auto sup = f.start(restart_strategy::one_for_one,
                     {f.child("t", restart_policy::transient),
                      f.child("tmp", restart_policy::temporary)});
  f.kill(f.which(sup, "t"));
  CHECK(f.starts["t"] == 2);
  f.self->send(f.which(sup, "t"), -1); // asks it to exit normally
  f.sched.run();
  CHECK(f.starts["t"] == 2);
  CHECK_FALSE(f.which(sup, "t"));
  f.kill(f.which(sup, "tmp"));
  CHECK(f.starts["tmp"] == 1);
  auto t = f.tree(sup);
  CHECK(t.children[0].state == "stopped");
  CHECK(t.children[1].state == "stopped");
}

TEST_CASE("kill by path reaches a nested child", "[runtime][supervisor]") {
  fixture f;
  auto inner = [&f](caf::actor_system& s, const sibling_map&) {
    return spawn_supervisor(s, "inner", {restart_strategy::one_for_one, 3, std::chrono::seconds(5)},
                            {f.child("leaf")});
  };
  auto top = f.start(restart_strategy::one_for_one,
                     {{"inner", inner, restart_policy::permanent, true, true}});
  f.self->send(top, atoms::kill::value, std::string("inner/leaf"));
  f.sched.run();
  std::string text;
  f.self->receive([&](std::string& t) { text = t; }, caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK_THAT(text, Catch::StartsWith("killed inner/leaf (#"));
  CHECK_THAT(text, Catch::EndsWith("its supervisor inner restarts it"));
  CHECK(f.starts["leaf"] == 2);
  // Killing a supervisor takes its subtree down with it, then restarts both.
  auto old_leaf = f.which(f.which(top, "inner"), "leaf");
  f.self->send(top, atoms::kill::value, std::string("inner"));
  f.sched.run();
  std::string top_text;
  f.self->receive([&](std::string& t) { top_text = t; },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  // The same form at every depth: the path as given, then the supervisor that restarts it.
  CHECK_THAT(top_text, Catch::StartsWith("killed inner (#"));
  CHECK_THAT(top_text, Catch::EndsWith("restarts it"));
  CHECK(f.starts["leaf"] == 3);
  CHECK_FALSE(f.answers(old_leaf));
  f.self->send(top, atoms::kill::value, std::string("nobody"));
  f.sched.run();
  std::string err;
  f.self->receive([&](caf::error& e) { err = caf::to_string(e); },
                  caf::after(std::chrono::seconds(0)) >> [] {});
  CHECK_THAT(err, Catch::Contains("no actor 'nobody'"));
}

TEST_CASE("a restarted actor registered by name replaces its dead predecessor",
          "[runtime][supervisor]") {
  fixture f;
  auto idle = [](caf::event_based_actor*) -> caf::behavior {
    return {[](int) {}};
  };
  auto key = caf::atom_from_string("registered");
  auto first = f.sys.spawn(idle);
  register_as(f.sys, "registered", caf::actor_cast<caf::strong_actor_ptr>(first));
  caf::anon_send_exit(first, caf::exit_reason::kill);
  f.sched.run();
  auto second = f.sys.spawn(idle);
  // The trap: CAF 0.17's put keeps the dead one.
  f.sys.registry().put(key, caf::actor_cast<caf::strong_actor_ptr>(second));
  CHECK(f.sys.registry().get(key) == caf::actor_cast<caf::strong_actor_ptr>(first));
  register_as(f.sys, "registered", caf::actor_cast<caf::strong_actor_ptr>(second));
  CHECK(f.sys.registry().get(key) == caf::actor_cast<caf::strong_actor_ptr>(second));
  caf::anon_send_exit(second, caf::exit_reason::kill);
  f.sched.run();
  f.sys.registry().erase(key);
}
