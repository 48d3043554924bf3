// SPDX-License-Identifier: Apache-2.0
#pragma once
// The data plane of one app host (docs/dataplane.md): a communicator for each rank the host
// runs, joined to every other rank of the job. The host listens (TCP on its node's address, a
// Unix socket in the abstract namespace), publishes its endpoint through CAF at gang start,
// and connect() joins every pair of ranks once every host's endpoint is known:
//
// - two ranks of this host: a local ring pair (memory);
// - a rank of another process on this machine (same boot and network namespace): shm;
// - elsewhere, or when `transport` is "tcp": TCP.
//
// The lower rank dials the higher; every connection proves the attempt's key.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dataplane/comm.hpp"
#include "runtime/dataplane/tls_channel.hpp"
#include "runtime/dataplane/tcp_link.hpp"
#include "runtime/dataplane/transport.hpp"

namespace monkey::dp {

struct mesh_options {
  std::string key;                      ///< the attempt's (gang's) secret
  std::string tcp_host = "127.0.0.1";   ///< the address the TCP listener binds
  std::string transport = "auto";       ///< between processes: auto (shm on one machine), tcp, shm
  std::chrono::milliseconds timeout{60000};         ///< comm_options::timeout
  std::chrono::milliseconds connect_timeout{30000}; ///< joining every pair
  uint64_t ring_bytes = 4 << 20;        ///< each direction of a shm or local channel
  uint64_t segment_bytes = 4 << 20;     ///< comm_options::segment_bytes
  uint64_t max_early_bytes = uint64_t{1} << 30; ///< comm_options::max_early_bytes
  tls_files tls; ///< set: TCP links are TLS (mutual, against tls.ca) after their key proof
};

/// What identifies this machine for the shm transport: the boot and the network namespace.
std::string machine_identity();

class mesh {
public:
  /// Listens; `local`: the ranks this host runs (of `world`).
  static expected<std::unique_ptr<mesh>> create(int32_t world, std::vector<int32_t> local,
                                                mesh_options opts);
  ~mesh();

  /// This host's endpoint, for the others: "dp1|machine|tcp host:port|unix name|ranks".
  const std::string& endpoint() const { return endpoint_; }
  /// Joins every pair of ranks, given every host's endpoint (this one's among them), and
  /// starts the communicators.
  status connect(const std::vector<std::string>& endpoints);
  /// The communicator of local rank `r` (nullptr: not this host's, or not connected).
  communicator* comm(int32_t r);
  /// Closes every communicator (pending operations fail).
  void close();

private:
  mesh() = default;
  int32_t world_ = 0;
  std::vector<int32_t> local_;
  mesh_options opts_;
  tcp_listener tcp_;
  unix_listener unix_;
  std::string endpoint_, machine_;
  std::shared_ptr<tls_context> tls_;
  std::shared_ptr<arena> arena_; ///< registered buffers (arena.hpp); null: none
  std::map<int32_t, std::unique_ptr<communicator>> comms_;
};

} // namespace monkey::dp
