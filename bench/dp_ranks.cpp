// SPDX-License-Identifier: Apache-2.0
// dp_ranks: one rank of a data plane world as its own process, for the multi-process tests
// (tests/integration/test_dataplane.py) and the benchmarks (bench/allreduce_vs_mpi.sh). The
// ranks meet through a folder: each writes its endpoint there and reads the others'.
//
//   dp_ranks --rank R --world W --dir D [--transport auto|tcp|shm] [--key K]
//            [--mode check|loop|bench|p2p] [--sizes N,N,...] [--iters I] [--timeout-ms T]
//            [--connect-ms C] [--segment-kb S] [--ring-kb K] [--tls-dir DIR [--tls-name NAME]]
//            [--registered all|odd]
//
// check: point-to-point and every collective over 1..sizes elements, compared bit for bit
//        with the ring-order reference; prints "ok ..." lines, or "FAIL ..." and exits 1.
// loop:  all-reduces sizes[0] elements until an error, printing "iter N" (fault tests);
//        the error is printed as "error after S s: ..." and the exit code is 3.
// bench: all-reduce algorithm bandwidth per size (rank 0 prints it).
// p2p:   rank 0 → rank 1 one-way bandwidth per size and the 8-byte round trip, beside memcpy.
// --registered: tensors from the communicator's shared arena (all ranks, or the odd ones: a
//        mixed group, which must take the ring and give the same sums).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtime/dataplane/mesh.hpp"
#include "runtime/dataplane/reference.hpp"

using namespace monkey;
using namespace monkey::dp;
using clock_type = std::chrono::steady_clock;

namespace {

struct args {
  int rank = -1, world = 0;
  std::string dir, transport = "auto", key = "dp-ranks-key", mode = "check";
  std::vector<uint64_t> sizes{1, 2, 7, 1000, 65537, 1000003};
  int iters = 20;
  long timeout_ms = 10000;
  long connect_ms = 30000;
  long segment_kb = 4096;
  long ring_kb = 0; ///< 0: the mesh's default
  std::string tls_dir, tls_name = "node";
  std::string registered; ///< "all", "odd" (odd ranks only) or "": which ranks' tensors
                          ///< come from the shared arena
};

[[noreturn]] void die(const std::string& why, int code = 1) {
  std::printf("FAIL rank: %s\n", why.c_str());
  std::fflush(stdout);
  std::_Exit(code);
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Where tensors come from: the heap, or (--registered) the communicator's shared arena.
communicator* arena_comm = nullptr;

buffer f32(uint64_t count) {
  return arena_comm ? arena_comm->alloc(dtype::f32, count) : buffer::f32(count);
}

buffer inputs(int32_t rank, uint64_t count, uint32_t salt) {
  auto b = f32(count);
  for (uint64_t k = 0; k < count; ++k)
    b[k] = reference::value(rank, k, salt);
  return b;
}

void must(const status& st, const std::string& what) {
  if (!st)
    die(what + ": " + st.error());
}

uint64_t mismatches(const buffer& got, const std::vector<int32_t>& group, uint32_t salt,
                    bool mean) {
  uint64_t bad = 0;
  for (uint64_t k = 0; k < got.count(); ++k) {
    float want = reference::ring_sum(group, got.count(), k, salt, mean);
    float have = got[k];
    bad += std::memcmp(&want, &have, sizeof(float)) != 0;
  }
  return bad;
}

void check_mode(communicator& c, const args& a) {
  std::vector<int32_t> all;
  for (int32_t r = 0; r < a.world; ++r)
    all.push_back(r);
  int n = a.world;
  for (auto count : a.sizes) {
    auto salt = static_cast<uint32_t>(count * 7 + static_cast<uint64_t>(n));
    // point-to-point around the ring
    {
      auto out = inputs(c.rank(), count, salt);
      auto in = f32(count);
      auto next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
      if (n > 1) {
        must(c.wait([&](completion d) {
               c.send(next, 5, out, [d, &c, &in, prev](const status& st, buffer) {
                 if (!st)
                   return d(st, {});
                 c.recv(prev, 5, in, d);
               });
             }),
             "p2p");
        auto want = inputs(prev, count, salt);
        if (std::memcmp(want.data(), in.data(), want.bytes()) != 0)
          die("p2p: the bytes from rank " + std::to_string(prev) + " differ");
      }
    }
    for (bool mean : {false, true}) {
      auto b = inputs(c.rank(), count, salt);
      must(c.wait([&](completion d) {
             c.allreduce(b, mean ? reduce_op::mean : reduce_op::sum, {}, d);
           }),
           "allreduce");
      if (auto bad = mismatches(b, all, salt, mean))
        die("allreduce " + std::string(mean ? "mean" : "sum") + " of " + std::to_string(count)
            + ": " + std::to_string(bad) + " elements differ from the ring-order reference");
    }
    {
      auto root = static_cast<int32_t>(count % static_cast<uint64_t>(n));
      auto b = inputs(c.rank(), count, salt);
      must(c.wait([&](completion d) { c.broadcast(b, root, {}, d); }), "broadcast");
      auto want = inputs(root, count, salt);
      if (std::memcmp(want.data(), b.data(), want.bytes()) != 0)
        die("broadcast of " + std::to_string(count) + " from rank " + std::to_string(root)
            + " differs");
    }
    {
      auto in = inputs(c.rank(), count, salt);
      auto mine = ring_chunk(count, n, c.rank());
      auto piece = f32(mine.count);
      auto full = f32(count);
      must(c.wait([&](completion d) { c.reduce_scatter(in, piece, reduce_op::sum, {}, d); }),
           "reduce_scatter");
      must(c.wait([&](completion d) { c.allgather(piece, full, {}, d); }), "allgather");
      if (auto bad = mismatches(full, all, salt, false))
        die("reduce_scatter + allgather of " + std::to_string(count) + ": "
            + std::to_string(bad) + " elements differ");
    }
    if (n >= 3) { // a group without rank 0, in another order
      std::vector<int32_t> group;
      for (int32_t r = n - 1; r >= 1; --r)
        group.push_back(r);
      if (c.rank() != 0) {
        auto b = inputs(c.rank(), count, salt);
        must(c.wait([&](completion d) { c.allreduce(b, reduce_op::sum, group, d); }),
             "group allreduce");
        if (auto bad = mismatches(b, group, salt, false))
          die("group allreduce of " + std::to_string(count) + ": " + std::to_string(bad)
              + " elements differ");
      }
    }
    std::printf("ok rank %d: p2p, allreduce sum/mean, broadcast, reduce_scatter, allgather%s "
                "of %llu elements over %s%s\n",
                c.rank(), n >= 3 ? ", group" : "", static_cast<unsigned long long>(count),
                c.transport((c.rank() + 1) % n).c_str(),
                arena_comm ? " (registered buffers)" : "");
    std::fflush(stdout);
  }
}

void loop_mode(communicator& c, const args& a) {
  auto b = inputs(c.rank(), a.sizes.front(), 1);
  auto t0 = clock_type::now();
  for (int i = 0;; ++i) {
    auto last = clock_type::now();
    auto st = c.wait([&](completion d) { c.allreduce(b, reduce_op::mean, {}, d); });
    if (!st) {
      std::printf("error after %.2f s: %s\n", seconds_since(last), st.error().c_str());
      std::fflush(stdout);
      std::_Exit(3);
    }
    std::printf("iter %d\n", i);
    std::fflush(stdout);
    if (a.iters > 0 && i + 1 >= a.iters && seconds_since(t0) > 0)
      return;
  }
}

void bench_mode(communicator& c, const args& a) {
  for (auto count : a.sizes) {
    auto b = inputs(c.rank(), count, 3);
    // Warm up (first touch of the scratch and the rings), then time.
    for (int i = 0; i < 2; ++i)
      must(c.wait([&](completion d) { c.allreduce(b, reduce_op::sum, {}, d); }), "allreduce");
    std::vector<double> times;
    for (int i = 0; i < a.iters; ++i) {
      auto t0 = clock_type::now();
      must(c.wait([&](completion d) { c.allreduce(b, reduce_op::sum, {}, d); }), "allreduce");
      times.push_back(seconds_since(t0));
    }
    std::sort(times.begin(), times.end());
    auto med = times[times.size() / 2];
    if (c.rank() == 0)
      std::printf("allreduce transport=%s%s ranks=%d bytes=%llu median_us=%.0f algbw_GBps=%.3f\n",
                  c.transport(1 % c.world()).c_str(), arena_comm ? "-reg" : "", c.world(),
                  static_cast<unsigned long long>(count * 4), med * 1e6, count * 4 / med / 1e9);
    std::fflush(stdout);
  }
}

void p2p_mode(communicator& c, const args& a) {
  if (c.rank() > 1)
    return;
  for (auto count : a.sizes) {
    auto b = inputs(c.rank(), count, 4);
    auto peer = 1 - c.rank();
    auto refs0 = c.by_ref_sends(), addrs0 = c.by_addr_sends();
    std::vector<double> times;
    for (int i = 0; i < a.iters + 2; ++i) {
      auto t0 = clock_type::now();
      if (c.rank() == 0) {
        must(c.wait([&](completion d) { c.send(peer, 1, b, d); }), "send");
        must(c.wait([&](completion d) { c.recv(peer, 2, buffer::f32(1), d); }), "ack");
      } else {
        must(c.wait([&](completion d) { c.recv(peer, 1, b, d); }), "recv");
        must(c.wait([&](completion d) { c.send(peer, 2, buffer::f32(1), d); }), "ack");
      }
      if (i >= 2)
        times.push_back(seconds_since(t0));
    }
    std::sort(times.begin(), times.end());
    auto med = times[times.size() / 2];
    if (c.rank() == 0) {
      // memcpy of the same bytes, measured in the same process and run
      auto dst = buffer::f32(count);
      std::memcpy(dst.data(), b.data(), b.bytes());
      std::vector<double> mt;
      for (int i = 0; i < a.iters; ++i) {
        auto t0 = clock_type::now();
        std::memcpy(dst.data(), b.data(), b.bytes());
        mt.push_back(seconds_since(t0));
      }
      std::sort(mt.begin(), mt.end());
      auto mmed = mt[mt.size() / 2];
      std::printf("p2p transport=%s%s bytes=%llu median_us=%.1f GBps=%.3f memcpy_GBps=%.3f "
                  "ratio=%.2f\n",
                  c.transport(1).c_str(),
                  c.by_ref_sends() > refs0 ? "-reg" : c.by_addr_sends() > addrs0 ? "-cma" : "",
                  static_cast<unsigned long long>(b.bytes()),
                  med * 1e6, b.bytes() / med / 1e9, b.bytes() / mmed / 1e9,
                  (b.bytes() / med) / (b.bytes() / mmed));
    }
    std::fflush(stdout);
  }
}

} // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN); // a peer that went away is an error (TLS writes raise it)
  args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc)
        die("dp_ranks: " + k + " needs a value", 2);
      return argv[++i];
    };
    if (k == "--rank")
      a.rank = std::atoi(val().c_str());
    else if (k == "--world")
      a.world = std::atoi(val().c_str());
    else if (k == "--dir")
      a.dir = val();
    else if (k == "--transport")
      a.transport = val();
    else if (k == "--key")
      a.key = val();
    else if (k == "--mode")
      a.mode = val();
    else if (k == "--iters")
      a.iters = std::atoi(val().c_str());
    else if (k == "--timeout-ms")
      a.timeout_ms = std::atol(val().c_str());
    else if (k == "--tls-dir")
      a.tls_dir = val();
    else if (k == "--tls-name")
      a.tls_name = val();
    else if (k == "--segment-kb")
      a.segment_kb = std::atol(val().c_str());
    else if (k == "--ring-kb")
      a.ring_kb = std::atol(val().c_str());
    else if (k == "--registered")
      a.registered = val();
    else if (k == "--connect-ms")
      a.connect_ms = std::atol(val().c_str());
    else if (k == "--sizes") {
      a.sizes.clear();
      std::stringstream ss(val());
      std::string t;
      while (std::getline(ss, t, ','))
        a.sizes.push_back(std::strtoull(t.c_str(), nullptr, 10));
    } else
      die("dp_ranks: unknown argument " + k, 2);
  }
  if (a.rank < 0 || a.world < 1 || a.rank >= a.world || a.dir.empty() || a.sizes.empty())
    die("dp_ranks: give --rank R --world W --dir D (R < W)", 2);
  mesh_options o;
  o.key = a.key;
  o.transport = a.transport;
  o.timeout = std::chrono::milliseconds(a.timeout_ms);
  o.connect_timeout = std::chrono::milliseconds(a.connect_ms);
  o.segment_bytes = static_cast<uint64_t>(a.segment_kb) << 10;
  if (a.ring_kb > 0)
    o.ring_bytes = static_cast<uint64_t>(a.ring_kb) << 10;
  if (!a.tls_dir.empty())
    o.tls = tls_files_in(a.tls_dir, a.tls_name);
  auto m = mesh::create(a.world, {a.rank}, o);
  if (!m)
    die(m.error());
  auto mine = a.dir + "/ep-" + std::to_string(a.rank);
  {
    std::ofstream(mine + ".tmp") << (*m)->endpoint();
  }
  std::rename((mine + ".tmp").c_str(), mine.c_str());
  std::vector<std::string> eps;
  auto until = clock_type::now() + std::chrono::seconds(30);
  for (int r = 0; r < a.world; ++r) {
    auto path = a.dir + "/ep-" + std::to_string(r);
    while (::access(path.c_str(), R_OK) != 0) {
      if (clock_type::now() > until)
        die("rank " + std::to_string(r) + " never wrote its endpoint");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    eps.push_back(read_file(path));
  }
  if (auto ok = (*m)->connect(eps); !ok)
    die(ok.error());
  auto& c = *(*m)->comm(a.rank);
  if (a.registered == "all" || (a.registered == "odd" && a.rank % 2 == 1)) {
    arena_comm = &c;
    if (!c.registered(c.alloc(dtype::f32, 1)))
      die("--registered: this rank has no shared arena (MONKEY_DP_ARENA_MB=0?)");
  } else if (!a.registered.empty() && a.registered != "odd") {
    die("dp_ranks: --registered takes all or odd, not " + a.registered, 2);
  }
  std::printf("joined rank %d of %d (pid %d)\n", a.rank, a.world, static_cast<int>(::getpid()));
  std::fflush(stdout);
  if (a.mode == "check") {
    check_mode(c, a);
    std::printf("in-place all-reduces: %llu\nby-reference sends: %llu\nby-address sends: %llu\n",
                static_cast<unsigned long long>(c.in_place_allreduces()),
                static_cast<unsigned long long>(c.by_ref_sends()),
                static_cast<unsigned long long>(c.by_addr_sends()));
  }
  else if (a.mode == "loop")
    loop_mode(c, a);
  else if (a.mode == "bench")
    bench_mode(c, a);
  else if (a.mode == "p2p")
    p2p_mode(c, a);
  else
    die("dp_ranks: unknown mode " + a.mode, 2);
  // Everyone done before anyone closes its links.
  auto token = buffer::f32(1);
  must(c.wait([&](completion d) { c.allreduce(token, reduce_op::sum, {}, d); }), "the final barrier");
  std::fflush(stdout);
  std::_Exit(0);
}
