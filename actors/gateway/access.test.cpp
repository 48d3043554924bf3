// SPDX-License-Identifier: Apache-2.0
#include "actors/gateway/access.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("each role sends only its own verbs", "[gateway][access]") {
  // Peers are not clients: a client session can send no node-to-node verb.
  for (auto v : {verb::peer_join, verb::peer_ping, verb::peer_ping_req, verb::peer_replicate,
                 verb::peer_digest, verb::peer_fetch, verb::peer_reserve, verb::peer_withdraw,
                 verb::peer_metrics, verb::peer_metric_pull, verb::peer_forget,
                 verb::peer_lease, verb::peer_gang_start, verb::peer_gang_poll}) {
    CHECK_FALSE(verb_allowed(role::client, v));
    CHECK_FALSE(verb_allowed(role::app, v));
    CHECK(verb_allowed(role::node, v));
    CHECK(route_of(v) == (v == verb::peer_join || v == verb::peer_ping || v == verb::peer_ping_req
                            ? destination::membership
                          : v == verb::peer_forget ? destination::router // drops its memory too
                                                   : destination::coordinator));
  }
  // Clients send the client verbs; nodes forward submissions and queries to each other.
  for (auto v : {verb::submit, verb::list, verb::show, verb::logs, verb::cancel, verb::why,
                 verb::remove}) {
    CHECK(verb_allowed(role::client, v));
    CHECK(verb_allowed(role::node, v));
    CHECK_FALSE(verb_allowed(role::app, v));
    CHECK(route_of(v) == destination::router);
  }
  for (auto v : {verb::tree, verb::kill_actor, verb::submit_tasks}) {
    CHECK(verb_allowed(role::client, v));
    CHECK_FALSE(verb_allowed(role::node, v));
  }
  CHECK(route_of(verb::submit_tasks) == destination::tasks);
  CHECK(route_of(verb::tree) == destination::root);
  // An app host's own verbs: only app sessions send them; the coordinator answers.
  for (auto v : {verb::app_report, verb::app_ready, verb::app_checkpoint}) {
    CHECK(verb_allowed(role::app, v));
    CHECK_FALSE(verb_allowed(role::client, v));
    CHECK_FALSE(verb_allowed(role::node, v));
    CHECK(route_of(v) == destination::coordinator);
  }
  // Checkpoint pieces move between nodes only; the checkpoints actor answers.
  for (auto v : {verb::peer_ckpt_push, verb::peer_ckpt_list}) {
    CHECK(verb_allowed(role::node, v));
    CHECK_FALSE(verb_allowed(role::client, v));
    CHECK_FALSE(verb_allowed(role::app, v));
    CHECK(route_of(v) == destination::checkpoints);
  }
  CHECK(verb_allowed(role::client, verb::checkpoints));
  CHECK_FALSE(verb_allowed(role::app, verb::checkpoints));
  CHECK(route_of(verb::checkpoints) == destination::checkpoints);
  // Shipping bundles: clients only (a sweep's trials reuse what its client shipped).
  for (auto v : {verb::ship_have, verb::ship_put, verb::ship_get}) {
    CHECK(verb_allowed(role::client, v));
    CHECK_FALSE(verb_allowed(role::app, v));
    CHECK(route_of(v) == destination::checkpoints);
  }
  // The stores' collection asks the other nodes' coordinators which entries are in use.
  CHECK(verb_allowed(role::node, verb::peer_store_refs));
  CHECK_FALSE(verb_allowed(role::client, verb::peer_store_refs));
  CHECK_FALSE(verb_allowed(role::app, verb::peer_store_refs));
  CHECK(route_of(verb::peer_store_refs) == destination::coordinator);
  // The handshake is open to all, and status.
  for (auto r : {role::client, role::node, role::app}) {
    CHECK(verb_allowed(r, verb::hello));
    CHECK(verb_allowed(r, verb::auth));
    CHECK(verb_allowed(r, verb::status));
  }
}

TEST_CASE("role keys are derived apart: the client token gives away neither the node key "
          "nor an attempt's key",
          "[gateway][access]") {
  std::string secret = "0123456789abcdef0123456789abcdef";
  auto token = client_token(secret);
  auto node = node_key(secret);
  CHECK(token.size() == 64);
  CHECK(token != node);
  CHECK(attempt_key(node, "a.1.1") != attempt_key(node, "a.1.2"));
  CHECK(client_token("another-secret-0123456789") != token);
  CHECK(parse_role("node") == role::node);
  CHECK_FALSE(parse_role("admin"));
}
