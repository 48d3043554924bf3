// SPDX-License-Identifier: Apache-2.0
// The node's actors in one process, driven through the real client over loopback TCP:
// journal actor, coordinator, workers (real child processes) and the gateway.

#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <catch2/catch.hpp>

#include "runtime/wire/atoms.hpp"
#include "actors/coordinator/coordinator.hpp"
#include "actors/device_proxy.hpp"
#include "actors/node.hpp"
#include "actors/journal_actor.hpp"
#include "actors/messages.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/client/client.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/net/net_config.hpp"
#include "runtime/supervision/supervisor.hpp"

using namespace monkey;

namespace {

struct test_config : caf::actor_system_config {
  test_config() {
    apply_network_config(*this);
  }
};

constexpr const char* secret = "0123456789abcdef-test-secret";

/// One node in this process, published on a free loopback port.
struct node_fixture {
  test_config cfg;
  caf::actor_system sys{cfg};
  std::string dir;
  std::shared_ptr<journal> store;
  std::shared_ptr<launcher> launch = std::make_shared<launcher>();
  caf::actor root;
  std::string address;

  explicit node_fixture(int cpus = 2, std::string data_dir = {}) {
    if (data_dir.empty()) {
      char tmpl[] = "/tmp/monkey-actors-XXXXXX";
      data_dir = ::mkdtemp(tmpl);
    }
    dir = data_dir;
    auto j = journal::open(dir, nullptr);
    REQUIRE(j);
    store = std::move(*j);
    node_setup setup;
    auto& cc = setup.coordinator;
    cc.node = store->node();
    cc.incarnation = store->incarnation();
    cc.data_dir = dir;
    cc.total.cpus = cpus;
    cc.total.mem_mb = 4096;
    cc.kill_grace = std::chrono::milliseconds(500);
    devices::device_info cpu;
    cpu.name = "cpu0";
    cpu.kind = "cpu";
    cpu.slots = cpus;
    cc.devices.push_back(cpu);
    setup.store = store;
    setup.launch = launch;
    setup.secret = secret;
    auto started = start_node(sys, setup);
    REQUIRE(started);
    root = started->root;
    address = "127.0.0.1:" + std::to_string(started->port);
  }

  ~node_fixture() {
    caf::anon_send_exit(root, caf::exit_reason::user_shutdown);
  }

  std::unique_ptr<client> connect() {
    auto c = client::connect({address}, credentials{client_token(secret)});
    REQUIRE(c);
    return std::move(*c);
  }
};

job_id submit(client& c, job_spec spec, std::vector<job_id>* all = nullptr) {
  submit_request req;
  req.spec = std::move(spec);
  auto r = c.call<submit_reply>(verb::submit, req);
  REQUIRE(r);
  REQUIRE_FALSE(r->ids.empty());
  if (all)
    *all = r->ids;
  return r->ids.front();
}

job_spec sh(const std::string& script) {
  job_spec s;
  s.command = {"/bin/sh", "-c", script};
  return s;
}

show_reply wait_final(client& c, const job_id& id, int seconds = 60) {
  for (int i = 0; i < seconds * 20; ++i) {
    auto r = c.call<show_reply>(verb::show, id_request{id.str()});
    REQUIRE(r);
    if (is_final(r->record.state))
      return *r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("job " << id.str() << " did not finish");
  return {};
}

/// Waits until the job's attempt runs with a known pid.
void wait_running(client& c, const job_id& id) {
  for (int i = 0; i < 500; ++i) {
    auto s = c.call<show_reply>(verb::show, id_request{id.str()});
    REQUIRE(s);
    if (s->record.state == job_state::running && s->record.attempts.back().pid > 0)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("job " << id.str() << " did not start");
}

std::string read_log(client& c, const job_id& id, int attempt = 0) {
  logs_request req;
  req.id = id.str();
  req.attempt = attempt;
  auto r = c.call<logs_reply>(verb::logs, req);
  REQUIRE(r);
  return r->data;
}

} // namespace

TEST_CASE("a command job runs with its parameters and reports metrics", "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  auto spec = sh("echo lr=$MONKEY_PARAM_LR seed=$MONKEY_SEED arg={lr}; "
                 "echo 'MONKEY_METRIC step=1 loss=0.5'; echo 'MONKEY_METRIC step=2 loss=0.25'");
  spec.params["lr"] = "0.1";
  spec.seed = 77;
  spec.has_seed = true;
  auto id = submit(*c, spec);
  auto r = wait_final(*c, id);
  CHECK(r.record.state == job_state::succeeded);
  REQUIRE(r.record.attempts.size() == 1);
  CHECK(r.record.attempts[0].exit_code == 0);
  CHECK(read_log(*c, id) == "lr=0.1 seed=77 arg=0.1\nMONKEY_METRIC step=1 loss=0.5\n"
                            "MONKEY_METRIC step=2 loss=0.25\n");
  CHECK(r.last_metrics.at("loss") == Approx(0.25));
  CHECK(r.last_metrics.count("step") == 0); // step= names the line's points
  REQUIRE(r.metric_history.count("loss"));
  CHECK(r.metric_history.at("loss").count == 2);
  CHECK(r.metric_history.at("loss").first == Approx(0.5));
  id_request series{id.str()};
  series.metric = "loss";
  auto s = c->call<show_reply>(verb::show, series);
  REQUIRE(s);
  REQUIRE(s->series.size() == 2);
  CHECK(s->series[0].step == 1);
  CHECK(s->series[1].step == 2);
  CHECK(s->series[1].value == Approx(0.25));
}

TEST_CASE("a failing job is retried exactly --retries times", "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  auto spec = sh("echo attempt $MONKEY_ATTEMPT; exit 3");
  spec.retries = 2;
  auto id = submit(*c, spec);
  auto r = wait_final(*c, id);
  CHECK(r.record.state == job_state::failed);
  CHECK(r.record.attempts.size() == 3);
  CHECK(r.record.retries_used == 2);
  CHECK(r.record.attempts.back().cause == "exit 3");
  CHECK(read_log(*c, id, 2) == "attempt 2\n");
}

TEST_CASE("a job that succeeds on a retry ends succeeded", "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  auto spec = sh("[ \"$MONKEY_ATTEMPT\" -ge 2 ]");
  spec.retries = 5;
  auto r = wait_final(*c, submit(*c, spec));
  CHECK(r.record.state == job_state::succeeded);
  CHECK(r.record.attempts.size() == 2);
}

TEST_CASE("a timeout stops the job and is reported as such", "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  auto spec = sh("trap '' TERM; sleep 30");
  spec.timeout_s = 0.5;
  auto r = wait_final(*c, submit(*c, spec));
  CHECK(r.record.state == job_state::timed_out);
  CHECK_THAT(r.record.attempts.back().cause, Catch::Contains("timeout after"));
  CHECK_THAT(r.record.attempts.back().cause, Catch::Contains("SIGKILL after the grace period"));
}

TEST_CASE("cancel stops a running job and a queued one", "[actors][coordinator]") {
  node_fixture node(1);
  auto c = node.connect();
  auto running = submit(*c, sh("sleep 30"));
  auto queued = submit(*c, sh("true"));
  wait_running(*c, running);
  auto w = c->call<text_reply>(verb::why, id_request{queued.str()});
  REQUIRE(w);
  CHECK_THAT(w->text, Catch::Contains("needs 1 cpus, 0 free"));
  REQUIRE(c->call<text_reply>(verb::cancel, id_request{queued.str()}));
  REQUIRE(c->call<text_reply>(verb::cancel, id_request{running.str()}));
  CHECK(wait_final(*c, queued).record.state == job_state::cancelled);
  auto r = wait_final(*c, running);
  CHECK(r.record.state == job_state::cancelled);
  auto again = c->call<text_reply>(verb::cancel, id_request{running.str()});
  REQUIRE_FALSE(again);
  CHECK_THAT(again.error(), Catch::Contains("already ended"));
}

TEST_CASE("dependencies wait for their job and fail when it cannot succeed",
          "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  auto first = submit(*c, sh("sleep 0.3; echo first >> " + node.dir + "/order"));
  auto second_spec = sh("echo second >> " + node.dir + "/order");
  second_spec.after.push_back({"ok", first});
  auto second = submit(*c, second_spec);
  auto failing = submit(*c, sh("exit 1"));
  auto never_spec = sh("true");
  never_spec.after.push_back({"ok", failing});
  auto never = submit(*c, never_spec);
  auto any_spec = sh("true");
  any_spec.after.push_back({"any", failing});
  auto any = submit(*c, any_spec);
  CHECK(wait_final(*c, second).record.state == job_state::succeeded);
  std::ifstream in(node.dir + "/order");
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "first\nsecond\n");
  auto n = wait_final(*c, never);
  CHECK(n.record.state == job_state::cancelled);
  CHECK_THAT(n.record.reason, Catch::Contains("can never be met"));
  CHECK(wait_final(*c, any).record.state == job_state::succeeded);
}

TEST_CASE("an array gives every element its index", "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  auto spec = sh("echo $MONKEY_ARRAY_INDEX");
  spec.array = "0-4";
  std::vector<job_id> ids;
  submit(*c, spec, &ids);
  REQUIRE(ids.size() == 5);
  for (size_t i = 0; i < ids.size(); ++i) {
    CHECK(wait_final(*c, ids[i]).record.state == job_state::succeeded);
    CHECK(read_log(*c, ids[i]) == std::to_string(i) + "\n");
  }
}

TEST_CASE("a submit retried with the same key creates one job", "[actors][coordinator]") {
  node_fixture node;
  auto c = node.connect();
  submit_request req;
  req.spec = sh("true");
  req.client_key = "key-1";
  auto a = c->call<submit_reply>(verb::submit, req);
  auto b = c->call<submit_reply>(verb::submit, req);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->ids == b->ids);
  CHECK(b->duplicate);
  auto all = c->call<list_reply>(verb::list, list_request{});
  REQUIRE(all);
  CHECK(all->jobs.size() == 1);
}

TEST_CASE("bad requests get errors naming the problem", "[actors][gateway]") {
  node_fixture node;
  auto c = node.connect();
  auto garbage = c->call(verb::submit, std::string("\xc1\xc1\xc1", 3));
  REQUIRE_FALSE(garbage);
  CHECK_THAT(garbage.error(), Catch::Contains("malformed"));
  submit_request req;
  req.spec.command = {};
  auto invalid = c->call<submit_reply>(verb::submit, req);
  REQUIRE_FALSE(invalid);
  CHECK_THAT(invalid.error(), Catch::Contains("command: missing"));
  submit_request app_req;
  app_req.spec.app = "nosuchapp";
  auto app = c->call<submit_reply>(verb::submit, app_req);
  REQUIRE_FALSE(app);
  CHECK_THAT(app.error(), Catch::Contains("no node of the cluster has an app 'nosuchapp'"));
  auto unknown = c->call(static_cast<verb>(999), std::string{});
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error(), Catch::Contains("unknown verb"));
  auto missing = c->call<show_reply>(verb::show, id_request{"ZZZZZZZZ"});
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error(), Catch::Contains("no job"));
  auto bad_dep = sh("true");
  bad_dep.after.push_back({"ok", job_id::generate()});
  submit_request dep_req;
  dep_req.spec = bad_dep;
  auto dep = c->call<submit_reply>(verb::submit, dep_req);
  REQUIRE_FALSE(dep);
  CHECK_THAT(dep.error(), Catch::Contains("after: no job"));
}

TEST_CASE("a client with the wrong secret is refused", "[actors][gateway]") {
  node_fixture node;
  auto c = client::connect({node.address}, credentials{client_token("wrong-secret-0123456789")});
  REQUIRE_FALSE(c);
  CHECK_THAT(c.error(), Catch::Contains("does not know this cluster's token"));
}

TEST_CASE("peers are not clients: each role proves its own key and sends only its verbs",
          "[actors][gateway]") {
  node_fixture node;
  replicate_request peer_verb;
  peer_verb.from = "0000000000000001";
  // A client session (the client token) cannot send a node-to-node verb.
  auto c = node.connect();
  auto refused = c->call(verb::peer_replicate, encode(peer_verb));
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("not allowed for a client session"));
  // A node session (the node key) can; a client's token does not prove the node role.
  credentials as_node{node_key(secret)};
  as_node.role = "node";
  auto n = client::connect({node.address}, as_node);
  REQUIRE(n);
  CHECK((*n)->call(verb::peer_replicate, encode(peer_verb)));
  CHECK_FALSE((*n)->call(verb::tree, std::string{})); // and no client verb it has no use for
  credentials fake_node{client_token(secret)};
  fake_node.role = "node";
  auto impostor = client::connect({node.address}, fake_node);
  REQUIRE_FALSE(impostor);
  CHECK_THAT(impostor.error(), Catch::Contains("authentication failed"));
  // An app host proves its attempt's key and gets only the app verbs (status so far).
  credentials as_app{attempt_key(node_key(secret), "aa.1.7")};
  as_app.role = "app";
  as_app.attempt = "aa.1.7";
  auto a = client::connect({node.address}, as_app);
  REQUIRE(a);
  CHECK((*a)->call(verb::status, std::string{}));
  auto submit = (*a)->call(verb::submit, encode(submit_request{}));
  REQUIRE_FALSE(submit);
  CHECK_THAT(submit.error(), Catch::Contains("not allowed for an app session"));
  as_app.attempt = "aa.1.8"; // another attempt's key
  CHECK_FALSE(client::connect({node.address}, as_app));
}

TEST_CASE("requests before authentication are refused", "[actors][gateway]") {
  node_fixture node;
  test_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto port = std::stoi(node.address.substr(node.address.rfind(':') + 1));
  auto gw = sys.middleman().remote_actor("127.0.0.1", static_cast<uint16_t>(port));
  REQUIRE(gw);
  std::string problem;
  self->request(*gw, std::chrono::seconds(10),
                envelope{static_cast<uint16_t>(verb::list), encode(list_request{})})
    .receive([&](std::string&) { problem = "answered"; },
             [&](caf::error& e) { problem = describe(e); });
  CHECK_THAT(problem, Catch::Contains("not authenticated"));
}

TEST_CASE("the journal actor commits concurrent writes and answers each writer",
          "[actors][journal]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  char tmpl[] = "/tmp/monkey-jactor-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  std::shared_ptr<journal> store = std::move(*j);
  auto ja = spawn_journal(sys, store);
  caf::scoped_actor self{sys};
  caf::actor test = self;
  // One writer sends 200 writes without waiting: they land in the mailbox together and
  // are grouped into few commits; every one of them must still be answered.
  sys.spawn([=](caf::event_based_actor* a) -> caf::behavior {
    auto answered = std::make_shared<int>(0);
    for (int i = 0; i < 200; ++i) {
      write_batch b;
      job_record rec;
      rec.id = job_id::generate();
      rec.spec.command = {"x"};
      rec.version = 1;
      b.records.push_back(rec);
      a->request(ja, std::chrono::seconds(30), atoms::write::value, std::move(b))
        .then([=](bool) {
          if (++*answered == 200) {
            a->send(test, *answered);
            a->quit();
          }
        });
    }
    return {[](int) {}};
  });
  int replies = 0;
  self->receive([&](int n) { replies = n; }, caf::after(std::chrono::seconds(60)) >> [] {});
  CHECK(replies == 200);
  record_list loaded;
  self->request(ja, std::chrono::seconds(30), atoms::load::value)
    .receive([&](record_list& r) { loaded = std::move(r); }, [](caf::error&) {});
  CHECK(loaded.size() == 200);
  caf::anon_send_exit(ja, caf::exit_reason::user_shutdown);
}

TEST_CASE("killed actors are restarted and the running job still finishes once",
          "[actors][supervisor]") {
  node_fixture node;
  auto c = node.connect();
  auto id = submit(*c, sh("sleep 1.5; echo done"));
  wait_running(*c, id);
  auto kill = [&](const std::string& path) {
    auto r = c->call(verb::kill_actor, encode(path));
    REQUIRE(r);
    CHECK_THAT(*r, Catch::Contains("killed"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  };
  kill("core/coordinator/worker-" + id.short_str() + "-1"); // re-adopted by a new worker
  kill("core/coordinator");                                 // recovers from the journal
  kill("core/journal");                                     // restarts the coordinator too
  auto tree_body = c->call(verb::tree, std::string{});
  REQUIRE(tree_body);
  auto tree = decode<tree_node>(*tree_body, "tree");
  REQUIRE(tree);
  auto text = render_tree(*tree);
  CHECK_THAT(text, Catch::Contains("journal  [actor"));
  CHECK_THAT(text, Catch::Contains("restarts 2")); // the coordinator
  auto r = wait_final(*c, id);
  CHECK(r.record.state == job_state::succeeded);
  CHECK(r.record.attempts.size() == 1);
  CHECK(read_log(*c, id) == "done\n");
  auto unknown = c->call(verb::kill_actor, encode(std::string("core/nobody")));
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error(), Catch::Contains("no actor 'nobody'"));
}

TEST_CASE("a device proxy runs chunks on its slots and reruns the chunk of a killed worker",
          "[actors][devices]") {
  test_config cfg;
  caf::actor_system sys{cfg};
  devices::device_info info;
  info.name = "cpu0";
  info.kind = "cpu";
  info.slots = 2;
  auto proxy = spawn_device_proxy(sys, info);
  caf::scoped_actor self{sys};
  auto batch = job_id::generate();
  // Four chunks of sleep tasks: two run, two wait for a free slot.
  for (uint64_t i = 0; i < 4; ++i) {
    task_chunk c;
    c.seq = i + 1;
    c.batch = batch;
    c.fn = find_task_kind("sleep");
    c.arg = 20000; // 20 ms a task
    c.first = i * 10;
    c.count = 10;
    self->send(proxy, atoms::run_tasks::value, c);
  }
  std::string row_body;
  self->request(proxy, std::chrono::seconds(5), atoms::info::value)
    .receive([&](const std::string& body) { row_body = body; },
             [&](caf::error& e) { FAIL(caf::to_string(e)); });
  auto row = decode<device_row>(row_body, "device row");
  REQUIRE(row);
  CHECK(row->slots == 2);
  CHECK(row->free_slots == 0);
  // Kill slot0 while it runs its first chunk: the chunk must be reported anyway.
  std::string killed;
  self->request(proxy, std::chrono::seconds(5), atoms::kill::value, std::string("slot0"))
    .receive([&](const std::string& s) { killed = s; },
             [&](caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(killed.find("killed") != std::string::npos);
  std::set<uint64_t> seen;
  uint64_t tasks = 0;
  for (int i = 0; i < 4;) {
    bool got = false;
    self->receive(
      [&](atoms::task_done, const chunk_result& r) {
        CHECK(r.failures.empty());
        if (seen.insert(r.seq).second) {
          tasks += r.count;
          ++i;
        }
        got = true;
      },
      caf::after(std::chrono::seconds(30)) >> [&] { FAIL("no chunk result in 30 s"); });
    REQUIRE(got);
  }
  CHECK(seen == std::set<uint64_t>{1, 2, 3, 4});
  CHECK(tasks == 40);
  caf::anon_send_exit(proxy, caf::exit_reason::user_shutdown);
}

TEST_CASE("task batches run through the node, once per client key", "[actors][tasks]") {
  node_fixture node;
  auto c = node.connect();
  submit_tasks_request req;
  req.kind = "fail_every";
  req.arg = 7;
  req.count = 1000;
  req.client_key = "key-1";
  auto first = c->call<submit_tasks_reply>(verb::submit_tasks, req);
  REQUIRE(first);
  CHECK_FALSE(first->duplicate);
  auto again = c->call<submit_tasks_reply>(verb::submit_tasks, req);
  REQUIRE(again);
  CHECK(again->duplicate);
  CHECK(again->id == first->id);
  task_batch_status st;
  for (int i = 0; i < 100; ++i) {
    auto s = c->call<task_batch_status>(verb::wait_tasks,
                                        wait_tasks_request{first->id.str(), 1000});
    REQUIRE(s);
    st = *s;
    if (st.finished_ms)
      break;
  }
  REQUIRE(st.finished_ms > 0);
  CHECK(st.failed == 143); // 0, 7, ..., 994
  CHECK(st.succeeded == 857);
  auto list = c->call<task_list_reply>(verb::list_tasks, list_request{});
  REQUIRE(list);
  CHECK(list->batches.size() == 1);
  req.kind = "nope";
  req.client_key.clear();
  auto bad = c->call<submit_tasks_reply>(verb::submit_tasks, req);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("no task kind 'nope'") != std::string::npos);
}
