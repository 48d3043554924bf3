// SPDX-License-Identifier: Apache-2.0
#pragma once
// Cluster membership, SWIM-style: every node keeps a table of (node, incarnation, state)
// and spreads changes by piggybacking them on its probes (no all-to-all fan-out). This is
// the table and its rules; actors/membership.cpp does the probing. Plain C++: no CAF.
// Protocol and guarantees: docs/cluster.md.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/wire/codec.hpp"

namespace monkey {

enum class member_state : uint8_t {
  alive = 0,
  suspect = 1, ///< a probe or the connection failed; others confirm or it refutes
  dead = 2,    ///< confirmed (connection refused) or suspected past the timeout
  left = 3,    ///< a planned leave: not a failure
};

const char* to_string(member_state s);

/// An app a node can run (found in its --app-dir): its name, its build (a hash of the
/// executable) and its parameter schema (the JSON of `monkey-app-NAME --describe`).
struct app_entry {
  std::string name;
  std::string build;
  std::string schema;
  MSGPACK_DEFINE_MAP(name, build, schema);
};

struct member {
  std::string node;         ///< node id (16 hex digits)
  std::string address;      ///< host:port where its gateway listens
  uint64_t incarnation = 0; ///< (runtime start << 32) | refutations
  member_state state = member_state::alive;
  int64_t since_ms = 0;     ///< when this node's view of it last changed state (local clock)
  std::string reason;       ///< why it is in this state
  int32_t pid = 0;
  int32_t cpus = 0;
  int32_t gpus = 0;
  std::string devices;      ///< e.g. "cpu0,cuda0"
  /// The name users give the node (`monkey-runtime --name`; default host:port): shown by
  /// `nodes`, `jobs` and `show`, accepted wherever a node is named.
  std::string name;
  std::vector<std::string> tags; ///< what it offers (--tags, and `app:NAME@BUILD` per app)
  std::vector<app_entry> apps;
  MSGPACK_DEFINE_MAP(node, address, incarnation, state, since_ms, reason, pid, cpus, gpus,
                     devices, name, tags, apps);
};

/// "3.1": the runtime start and the refutations within it.
std::string incarnation_text(uint64_t inc);

/// The name a node gets without `--name`: the short host name and the port of `address`
/// ("lab3:4701").
std::string default_node_name(const std::string& address);

/// The members `text` names: the one whose name, node id or address it is; else those
/// whose node id starts with it (4 or more characters). Several when it is ambiguous.
std::vector<const member*> find_members(const std::vector<member>& members,
                                        const std::string& text);

/// A warning when a planned leave (drain) of the alive nodes `leaving` leaves the cluster
/// without a majority of its agreed list (`agreed` members; a leave takes the node off it at
/// once), "" when a majority stays.
std::string leave_warning(const std::vector<member>& members, uint32_t agreed,
                          const std::vector<std::string>& leaving);

/// "n2 (3f2a9c01d4e5b6a7)" for a member of `members`, or `node` when none is known.
std::string node_label(const std::vector<member>& members, const std::string& node);

/// True when `a` supersedes `b` (same node): a higher incarnation, or the same one and a
/// graver state (alive < suspect < dead/left).
bool supersedes(const member& a, const member& b);

class member_table {
public:
  explicit member_table(member self);

  const member& self() const { return members_.at(self_); }
  const std::string& self_id() const { return self_; }

  /// Applies what another node says of a member. Returns true when the view changed (the
  /// update is then spread further). News that this node itself is suspect or dead makes
  /// it refute: its incarnation goes above the rumour's and "alive" is spread instead.
  bool apply(const member& m, int64_t now);

  /// Local judgements (spread like any update). No effect on a member already in that
  /// state or graver at its incarnation, nor on this node itself.
  bool suspect(const std::string& node, const std::string& reason, int64_t now);
  bool declare_dead(const std::string& node, const std::string& reason, int64_t now);
  /// This node leaves on purpose.
  void leave(int64_t now);

  /// Suspects whose suspicion started before `cutoff` (to be declared dead).
  std::vector<std::string> expired_suspects(int64_t cutoff) const;
  /// Restarts every suspicion's clock (after this node itself was paused: its own timers
  /// ran late, so the time others had to refute is not known).
  void restart_suspicions(int64_t now);
  /// Members declared dead (not left) since `cutoff`: revisited now and then, so that two
  /// nodes that each declared the other dead (after a freeze) meet again.
  std::vector<std::string> dead_since(int64_t cutoff) const;

  const member* find(const std::string& node) const;
  std::vector<member> all() const;
  /// Other members that are alive or suspect (they are probed).
  std::vector<std::string> probe_targets() const;
  size_t alive_count() const;

  /// Up to `max` updates to piggyback on the next message, the least-sent first. Each is
  /// sent about 3·log2(n + 1) times, then dropped.
  std::vector<member> piggyback(size_t max);
  size_t pending_updates() const { return gossip_.size(); }
  /// Counts every change of the table (to tell subscribers only when there is news).
  uint64_t changes() const { return changes_; }

  /// The last agreed member list: it grows with every member seen alive and shrinks (drops
  /// members dead or left for at least `settle_ms`) only while this node sees a majority of
  /// it alive. The wait keeps a partition, which takes several members away at about the
  /// same time, from being forgotten one by one by the minority side.
  const std::vector<std::string>& agreed() const { return agreed_; }
  /// Re-evaluates the agreed list at `now` (call it periodically).
  void refresh_agreed(int64_t now);
  void set_settle_ms(int64_t ms) { settle_ms_ = ms; }
  size_t agreed_alive() const;
  /// True while more than half of the agreed list is alive in this node's view.
  bool has_majority() const { return agreed_alive() * 2 > agreed_.size(); }

private:
  void enqueue(const std::string& node);
  std::string self_;
  std::map<std::string, member> members_;
  std::map<std::string, uint32_t> gossip_; ///< node → times its latest update was sent
  uint64_t changes_ = 0;
  std::vector<std::string> agreed_;
  int64_t settle_ms_ = 5000;
  int64_t last_now_ = 0;
};

/// The member list as an actor other than the membership sees it (the coordinator, the
/// query actor): what the membership last told it, and whether this node sees a majority.
class cluster_view {
public:
  explicit cluster_view(std::string self) : self_(std::move(self)) {}
  /// `agreed`, `agreed_alive`: the size of the membership's agreed member list and how
  /// many of it are alive (what `monkey nodes` prints; 0, 0: not told).
  void update(std::vector<member> members, bool majority, uint32_t agreed = 0,
              uint32_t agreed_alive = 0);

  const std::string& self() const { return self_; }
  bool known() const { return known_; }
  bool majority() const { return majority_; }
  const std::vector<member>& members() const { return members_; }
  const member* find(const std::string& node) const;
  /// This node: alive; unknown nodes: dead.
  member_state state_of(const std::string& node) const;
  bool alive(const std::string& node) const { return state_of(node) == member_state::alive; }
  /// This node first, then the other alive members.
  std::vector<std::string> alive_nodes() const;
  /// The other alive members.
  std::vector<std::string> others_alive() const;
  /// The other members that are alive or suspect. A suspect one may hold copies that no
  /// one else has: a decision that needs every copy (a sync, an adoption) asks it too and
  /// waits for its answer or its death verdict.
  std::vector<std::string> others_up() const;
  /// Members (other than this node) in `state`.
  std::vector<std::string> in_state(member_state state) const;
  /// "this node cannot see a majority of the cluster: 1 of 3 agreed members alive ..."
  std::string minority_text() const;

private:
  std::string self_;
  std::vector<member> members_;
  bool majority_ = true;
  bool known_ = false;
  uint32_t agreed_ = 0;
  uint32_t agreed_alive_ = 0;
};

} // namespace monkey

MSGPACK_ADD_ENUM(monkey::member_state);
