// SPDX-License-Identifier: Apache-2.0
#include "runtime/membership.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <unistd.h>

namespace monkey {

namespace {

int rank(member_state s) {
  switch (s) {
    case member_state::alive: return 0;
    case member_state::suspect: return 1;
    case member_state::dead:
    case member_state::left: return 2;
  }
  return 0;
}

} // namespace

const char* to_string(member_state s) {
  switch (s) {
    case member_state::alive: return "alive";
    case member_state::suspect: return "suspect";
    case member_state::dead: return "dead";
    case member_state::left: return "left";
  }
  return "?";
}

std::string incarnation_text(uint64_t inc) {
  return std::to_string(inc >> 32) + "." + std::to_string(inc & 0xFFFFFFFFu);
}

std::string default_node_name(const std::string& address) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || !host[0])
    std::snprintf(host, sizeof(host), "localhost");
  std::string h = host;
  if (auto dot = h.find('.'); dot != std::string::npos && dot > 0)
    h.resize(dot);
  auto colon = address.rfind(':');
  return colon == std::string::npos ? h : h + address.substr(colon);
}

std::vector<const member*> find_members(const std::vector<member>& members,
                                        const std::string& text) {
  std::vector<const member*> out;
  if (text.empty())
    return out;
  for (auto& m : members)
    if (m.name == text || m.node == text || m.address == text)
      out.push_back(&m);
  if (!out.empty())
    return out;
  if (text.size() >= 4)
    for (auto& m : members)
      if (m.node.compare(0, text.size(), text) == 0)
        out.push_back(&m);
  return out;
}

std::string leave_warning(const std::vector<member>& members, uint32_t agreed,
                          const std::vector<std::string>& leaving) {
  uint32_t alive = 0;
  for (auto& m : members)
    if (m.state == member_state::alive
        && std::find(leaving.begin(), leaving.end(), m.node) == leaving.end())
      ++alive;
  auto gone = static_cast<uint32_t>(leaving.size());
  auto stay = agreed > gone ? agreed - gone : 0;
  if (leaving.empty() || alive * 2 > stay)
    return {};
  return "after this, " + std::to_string(alive) + " of the " + std::to_string(stay)
         + " agreed members that stay are alive: no majority, so they start no attempts and "
           "refuse submissions until more nodes join or return";
}

std::string node_label(const std::vector<member>& members, const std::string& node) {
  for (auto& m : members)
    if (m.node == node && !m.name.empty())
      return m.name + " (" + node + ")";
  return node;
}

bool supersedes(const member& a, const member& b) {
  if (a.incarnation != b.incarnation)
    return a.incarnation > b.incarnation;
  return rank(a.state) > rank(b.state);
}

member_table::member_table(member self) : self_(self.node) {
  members_[self_] = std::move(self);
  enqueue(self_);
}

void member_table::enqueue(const std::string& node) {
  gossip_[node] = 0;
  ++changes_;
  refresh_agreed(last_now_);
}

size_t member_table::agreed_alive() const {
  size_t n = 0;
  for (auto& id : agreed_) {
    auto it = members_.find(id);
    n += it != members_.end() && it->second.state == member_state::alive ? 1 : 0;
  }
  return n;
}

void member_table::refresh_agreed(int64_t now) {
  last_now_ = std::max(last_now_, now);
  for (auto& [id, m] : members_)
    if (m.state == member_state::alive
        && std::find(agreed_.begin(), agreed_.end(), id) == agreed_.end())
      agreed_.push_back(id);
  // A planned leave is announced, not a failure: the member leaves the list at once, and a
  // partition cannot pass for one.
  agreed_.erase(std::remove_if(agreed_.begin(), agreed_.end(),
                               [&](const std::string& id) {
                                 auto it = members_.find(id);
                                 return id != self_ && it != members_.end()
                                        && it->second.state == member_state::left;
                               }),
                agreed_.end());
  if (!has_majority())
    return;
  agreed_.erase(std::remove_if(agreed_.begin(), agreed_.end(),
                               [&](const std::string& id) {
                                 auto it = members_.find(id);
                                 if (it == members_.end())
                                   return true;
                                 auto gone = it->second.state == member_state::dead
                                             || it->second.state == member_state::left;
                                 return gone && last_now_ - it->second.since_ms >= settle_ms_;
                               }),
                agreed_.end());
}

bool member_table::apply(const member& m, int64_t now) {
  last_now_ = std::max(last_now_, now);
  if (m.node.empty())
    return false;
  if (m.node == self_) {
    auto& me = members_[self_];
    if (m.state == member_state::alive || me.state == member_state::left)
      return false;
    if (m.incarnation < me.incarnation)
      return false;
    // A rumour that this node is suspect or dead: refute it with a higher incarnation.
    me.incarnation = m.incarnation + 1;
    me.reason = "refuted " + std::string(to_string(m.state)) + " (" + m.reason + ")";
    me.since_ms = now;
    enqueue(self_);
    return true;
  }
  auto it = members_.find(m.node);
  if (it != members_.end() && !supersedes(m, it->second)) {
    // Same news (or older): keep the local view, but learn details such as the address.
    return false;
  }
  member copy = m;
  bool state_changed = it == members_.end() || it->second.state != m.state;
  copy.since_ms = state_changed ? now : it->second.since_ms;
  members_[m.node] = std::move(copy);
  enqueue(m.node);
  return true;
}

bool member_table::suspect(const std::string& node, const std::string& reason, int64_t now) {
  last_now_ = std::max(last_now_, now);
  auto it = members_.find(node);
  if (it == members_.end() || node == self_ || it->second.state != member_state::alive)
    return false;
  it->second.state = member_state::suspect;
  it->second.reason = reason;
  it->second.since_ms = now;
  enqueue(node);
  return true;
}

bool member_table::declare_dead(const std::string& node, const std::string& reason, int64_t now) {
  last_now_ = std::max(last_now_, now);
  auto it = members_.find(node);
  if (it == members_.end() || node == self_ || rank(it->second.state) >= 2)
    return false;
  it->second.state = member_state::dead;
  it->second.reason = reason;
  it->second.since_ms = now;
  enqueue(node);
  return true;
}

void member_table::leave(int64_t now) {
  auto& me = members_[self_];
  me.state = member_state::left;
  me.reason = "planned leave";
  me.since_ms = now;
  enqueue(self_);
}

std::vector<std::string> member_table::expired_suspects(int64_t cutoff) const {
  std::vector<std::string> out;
  for (auto& [id, m] : members_)
    if (m.state == member_state::suspect && m.since_ms < cutoff)
      out.push_back(id);
  return out;
}

void member_table::restart_suspicions(int64_t now) {
  for (auto& [id, m] : members_)
    if (m.state == member_state::suspect)
      m.since_ms = now;
}

std::vector<std::string> member_table::dead_since(int64_t cutoff) const {
  std::vector<std::string> out;
  for (auto& [id, m] : members_)
    if (m.state == member_state::dead && m.since_ms >= cutoff)
      out.push_back(id);
  return out;
}

const member* member_table::find(const std::string& node) const {
  auto it = members_.find(node);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<member> member_table::all() const {
  std::vector<member> out;
  out.reserve(members_.size());
  for (auto& [id, m] : members_)
    out.push_back(m);
  return out;
}

std::vector<std::string> member_table::probe_targets() const {
  std::vector<std::string> out;
  for (auto& [id, m] : members_)
    if (id != self_ && (m.state == member_state::alive || m.state == member_state::suspect))
      out.push_back(id);
  return out;
}

size_t member_table::alive_count() const {
  size_t n = 0;
  for (auto& [id, m] : members_)
    n += m.state == member_state::alive ? 1 : 0;
  return n;
}

std::vector<member> member_table::piggyback(size_t max) {
  auto limit = static_cast<uint32_t>(
    std::ceil(3.0 * std::log2(static_cast<double>(members_.size()) + 1.0)));
  std::vector<std::pair<uint32_t, std::string>> order;
  for (auto& [id, sent] : gossip_)
    order.emplace_back(sent, id);
  std::sort(order.begin(), order.end());
  std::vector<member> out;
  for (auto& [sent, id] : order) {
    if (out.size() >= max)
      break;
    out.push_back(members_.at(id));
    if (++gossip_[id] >= limit)
      gossip_.erase(id);
  }
  return out;
}

void cluster_view::update(std::vector<member> members, bool majority, uint32_t agreed,
                          uint32_t agreed_alive) {
  members_ = std::move(members);
  majority_ = majority;
  agreed_ = agreed;
  agreed_alive_ = agreed_alive;
  known_ = true;
}

const member* cluster_view::find(const std::string& node) const {
  for (auto& m : members_)
    if (m.node == node)
      return &m;
  return nullptr;
}

member_state cluster_view::state_of(const std::string& node) const {
  if (node == self_)
    return member_state::alive;
  auto* m = find(node);
  return m ? m->state : member_state::dead;
}

std::vector<std::string> cluster_view::alive_nodes() const {
  std::vector<std::string> out{self_};
  for (auto& m : members_)
    if (m.node != self_ && m.state == member_state::alive)
      out.push_back(m.node);
  return out;
}

std::vector<std::string> cluster_view::others_alive() const {
  std::vector<std::string> out;
  for (auto& m : members_)
    if (m.node != self_ && m.state == member_state::alive)
      out.push_back(m.node);
  return out;
}

std::vector<std::string> cluster_view::others_up() const {
  std::vector<std::string> out;
  for (auto& m : members_)
    if (m.node != self_ && (m.state == member_state::alive || m.state == member_state::suspect))
      out.push_back(m.node);
  return out;
}

std::vector<std::string> cluster_view::in_state(member_state state) const {
  std::vector<std::string> out;
  for (auto& m : members_)
    if (m.node != self_ && m.state == state)
      out.push_back(m.node);
  return out;
}

std::string cluster_view::minority_text() const {
  size_t alive = agreed_alive_, total = agreed_;
  if (total == 0) { // not told the agreed list: count the members it knows
    alive = 0;
    for (auto& m : members_)
      alive += m.state == member_state::alive ? 1 : 0;
    total = members_.size();
  }
  // The same counts as `monkey nodes` ("agreed member list: N, of which alive: M").
  return "this node cannot see a majority of the cluster: " + std::to_string(alive) + " of "
         + std::to_string(total)
         + " agreed members alive (monkey nodes), a partition or many failures";
}

} // namespace monkey
