// SPDX-License-Identifier: Apache-2.0
#include "actors/gateway/access.hpp"

namespace monkey {

destination route_of(verb v) {
  switch (v) {
    case verb::hello:
    case verb::auth:
      return destination::gateway;
    case verb::nodes:
    case verb::peer_join:
    case verb::peer_ping:
    case verb::peer_ping_req:
      return destination::membership;
    case verb::tree:
    case verb::kill_actor:
      return destination::root;
    case verb::submit_tasks:
    case verb::list_tasks:
    case verb::wait_tasks:
      return destination::tasks;
    case verb::peer_replicate:
    case verb::peer_digest:
    case verb::peer_fetch:
    case verb::peer_reserve:
    case verb::peer_withdraw:
    case verb::peer_metrics:
    case verb::peer_metric_pull:
    case verb::peer_lease:
    case verb::peer_gang_start:
    case verb::peer_gang_poll:
    case verb::app_report:
    case verb::app_ready:
    case verb::app_checkpoint:
    case verb::peer_store_refs:
      return destination::coordinator;
    case verb::peer_ckpt_push:
    case verb::peer_ckpt_list:
    case verb::checkpoints:
    case verb::ship_have:
    case verb::ship_put:
    case verb::ship_get:
      return destination::checkpoints;
    case verb::submit:
    case verb::list:
    case verb::show:
    case verb::logs:
    case verb::cancel:
    case verb::why:
    case verb::status:
    case verb::devices:
    case verb::drain:
    case verb::remove:
    case verb::peer_forget:
      return destination::router;
  }
  return destination::router;
}

bool verb_allowed(role r, verb v) {
  switch (v) {
    case verb::hello:
    case verb::auth:
      return true;
    // Between nodes only.
    case verb::peer_join:
    case verb::peer_ping:
    case verb::peer_ping_req:
    case verb::peer_replicate:
    case verb::peer_digest:
    case verb::peer_fetch:
    case verb::peer_reserve:
    case verb::peer_withdraw:
    case verb::peer_metrics:
    case verb::peer_metric_pull:
    case verb::peer_lease:
    case verb::peer_gang_start:
    case verb::peer_gang_poll:
    case verb::peer_forget:
    case verb::peer_ckpt_push:
    case verb::peer_ckpt_list:
    case verb::peer_store_refs:
      return r == role::node;
    // Asked by clients and by routers of other nodes (forwarded submissions, queries).
    case verb::submit:
    case verb::list:
    case verb::show:
    case verb::logs:
    case verb::cancel:
    case verb::why:
    case verb::drain:
    case verb::nodes:
    case verb::remove:
      return r == role::client || r == role::node;
    // Clients only.
    case verb::devices:
    case verb::checkpoints:
    case verb::ship_have:
    case verb::ship_put:
    case verb::ship_get:
    case verb::tree:
    case verb::kill_actor:
    case verb::submit_tasks:
    case verb::list_tasks:
    case verb::wait_tasks:
      return r == role::client;
    case verb::status:
      return true; // app hosts too: the node's identity and devices
    // App hosts only: the SDK's verbs, for the attempt whose key the session proved.
    case verb::app_report:
    case verb::app_ready:
    case verb::app_checkpoint:
      return r == role::app;
  }
  return false;
}

} // namespace monkey
