// SPDX-License-Identifier: Apache-2.0
#include "runtime/ownership.hpp"

#include <algorithm>

namespace monkey {

namespace {

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

uint64_t mix(uint64_t z) { // splitmix64's finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

} // namespace

uint64_t rendezvous_weight(std::string_view key, std::string_view node) {
  return mix(fnv1a(node, fnv1a(key) ^ 0x9e3779b97f4a7c15ull));
}

std::vector<std::string> rendezvous_rank(std::string_view key, std::vector<std::string> nodes) {
  std::sort(nodes.begin(), nodes.end(), [&](const std::string& a, const std::string& b) {
    auto wa = rendezvous_weight(key, a), wb = rendezvous_weight(key, b);
    return wa != wb ? wa > wb : a < b;
  });
  return nodes;
}

expected<holders> choose_holders(std::string_view key, int32_t cpus, int32_t gpus,
                                 const std::vector<holder_candidate>& alive, size_t r) {
  std::vector<std::string> ids;
  for (auto& c : alive)
    ids.push_back(c.node);
  auto ranked = rendezvous_rank(key, ids);
  auto find = [&](const std::string& id) -> const holder_candidate& {
    for (auto& c : alive)
      if (c.node == id)
        return c;
    return alive.front();
  };
  holders out;
  for (auto& id : ranked) {
    auto& c = find(id);
    if (c.cpus >= cpus && c.gpus >= gpus) {
      out.owner = id;
      break;
    }
  }
  if (out.owner.empty()) {
    if (alive.empty())
      return failure{"no member is alive"};
    int32_t most_gpus = 0, most_cpus = 0;
    for (auto& c : alive) {
      most_gpus = std::max(most_gpus, c.gpus);
      most_cpus = std::max(most_cpus, c.cpus);
    }
    if (gpus > most_gpus)
      return failure{"needs " + std::to_string(gpus) + " gpus; no alive member has more than "
                     + std::to_string(most_gpus)};
    return failure{"needs " + std::to_string(cpus) + " cpus; no alive member has more than "
                   + std::to_string(most_cpus)};
  }
  out.replicas.push_back(out.owner);
  for (auto& id : ranked) {
    if (out.replicas.size() >= r)
      break;
    if (id != out.owner)
      out.replicas.push_back(id);
  }
  return out;
}

std::vector<std::string> holders_for(std::string_view key, const std::vector<std::string>& first,
                                     const std::vector<std::string>& current,
                                     const std::vector<std::string>& alive, size_t r,
                                     const std::vector<std::string>& exclude) {
  std::vector<std::string> out;
  auto has = [](const std::vector<std::string>& v, const std::string& n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  auto add = [&](const std::string& n) {
    if (out.size() < r && !has(out, n) && !has(exclude, n))
      out.push_back(n);
  };
  for (auto& n : first)
    add(n);
  for (auto& n : current)
    if (has(alive, n))
      add(n);
  std::vector<std::string> others;
  for (auto& n : alive)
    if (!has(out, n) && !has(exclude, n))
      others.push_back(n);
  for (auto& n : rendezvous_rank(key, std::move(others)))
    add(n);
  return out;
}

std::string successor(std::string_view key, const std::vector<std::string>& surviving) {
  if (surviving.empty())
    return {};
  return rendezvous_rank(key, surviving).front();
}

} // namespace monkey
