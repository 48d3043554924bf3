// SPDX-License-Identifier: Apache-2.0
// Sends by address (frame.hpp, frame_by_addr): a tensor that is not registered goes to a rank
// that reads this process's memory as its address, and the receiver copies it once
// (process_vm_readv between processes, memcpy between ranks of one process).
#include "runtime/dataplane/comm.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <atomic>
#include <future>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/dataplane/mesh.hpp"
#include "runtime/dataplane/reference.hpp"

using namespace monkey;
using namespace monkey::dp;

namespace {

buffer values(int32_t rank, uint64_t count, uint32_t salt) {
  auto b = buffer::f32(count);
  for (uint64_t k = 0; k < count; ++k)
    b[k] = reference::value(rank, k, salt);
  return b;
}

bool same_bytes(const buffer& a, const buffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
}

/// Two meshes of one process joined over shm (they read each other's memory: their probe
/// passes), ranks {0, 2} and {1}; the communicators by rank.
struct two_meshes {
  std::unique_ptr<mesh> a, b;
  communicator* c[3] = {nullptr, nullptr, nullptr};
  two_meshes() {
    mesh_options o;
    o.key = "the-key";
    o.transport = "shm";
    o.timeout = std::chrono::seconds(3);
    o.connect_timeout = std::chrono::seconds(5);
    o.ring_bytes = 1 << 16;
    auto m0 = mesh::create(3, {0, 2}, o);
    auto m1 = mesh::create(3, {1}, o);
    REQUIRE(m0);
    REQUIRE(m1);
    a = std::move(*m0);
    b = std::move(*m1);
    std::vector<std::string> eps{a->endpoint(), b->endpoint()};
    auto joined = std::async(std::launch::async, [&] { return b->connect(eps); });
    REQUIRE(a->connect(eps));
    REQUIRE(joined.get());
    c[0] = a->comm(0);
    c[1] = b->comm(1);
    c[2] = a->comm(2);
  }
  /// Every rank all-reduces its own tensor at once.
  std::vector<status> allreduce(std::vector<buffer>& t, reduce_op op) {
    std::vector<std::future<status>> fs;
    for (int r = 0; r < 3; ++r)
      fs.push_back(std::async(std::launch::async, [this, &t, op, r] {
        return c[r]->wait([&](completion d) { c[r]->allreduce(t[static_cast<size_t>(r)], op, {}, d); });
      }));
    std::vector<status> out;
    for (auto& f : fs)
      out.push_back(f.get());
    return out;
  }
};

} // namespace

TEST_CASE("sends by address: read once from the sender's memory (a kernel copy between meshes, "
          "memcpy between ranks of one), equal to what was sent, and small and huge tensors "
          "go inline",
          "[runtime][dataplane]") {
  two_meshes w;
  auto& c0 = *w.c[0];
  auto& c1 = *w.c[1];
  auto& c2 = *w.c[2];
  REQUIRE(c0.transport(1) == "shm");
  REQUIRE(c0.transport(2) == "local");
  CHECK(c0.single_copy(1)); // (the probe at set-up, both ways)
  CHECK(c1.single_copy(0));
  CHECK(c0.single_copy(2)); // (one process)
  CHECK_FALSE(c0.single_copy(0));
  CHECK_FALSE(c0.single_copy(7));

  const uint64_t n = 100003; // 400 KB: by address
  auto t = values(0, n, 1);
  auto want = values(0, n, 1);
  // Over shm (the two meshes probed each other at set-up: process_vm_readv), the receive
  // posted first; to the rank of the same process (memcpy), the receive posted after.
  auto got1 = std::async(std::launch::async, [&] {
    buffer into = buffer::f32(n);
    auto st = c1.wait([&](completion d) { c1.recv(0, 7, into, d); });
    return std::make_pair(st, into);
  });
  REQUIRE(c0.wait([&](completion d) { c0.send(1, 7, t, d); }));
  REQUIRE(c0.wait([&](completion d) { c0.send(2, 7, t, d); }));
  CHECK(c0.by_addr_sends() == 2);
  // The sends completed: the receivers hold their copies, and refilling changes nothing.
  std::memset(t.data(), 0, t.bytes());
  auto r1 = got1.get();
  REQUIRE(r1.first);
  CHECK(same_bytes(r1.second, want));
  buffer r2;
  REQUIRE(c2.wait([&](completion d) {
    c2.recv(0, 7, {}, [&r2, d](const status& st, buffer b) {
      r2 = b;
      d(st, {});
    });
  }));
  CHECK(same_bytes(r2, want));

  // The other way, into a receive of the wrong size: refused, the link still works.
  auto back = values(1, n, 2);
  auto wrong = std::async(std::launch::async, [&] {
    return c0.wait([&](completion d) { c0.recv(1, 8, buffer::f32(5), d); });
  });
  REQUIRE(c1.wait([&](completion d) { c1.send(0, 8, back, d); }));
  auto refused = wrong.get();
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("the receive expected 5"));
  CHECK(c1.by_addr_sends() == 1);

  // Under 64 KB, and over 32 MB: frames through the ring, the same bytes.
  auto small = values(0, 1000, 3);
  auto huge = values(0, (uint64_t{32} << 20) / 4 + 1, 4);
  for (auto* b : {&small, &huge}) {
    auto got = std::async(std::launch::async, [&] {
      buffer into;
      auto st = c1.wait([&](completion d) {
        c1.recv(0, 9, {}, [&into, d](const status& s, buffer x) {
          into = x;
          d(s, {});
        });
      });
      return std::make_pair(st, into);
    });
    REQUIRE(c0.wait([&](completion d) { c0.send(1, 9, *b, d); }));
    auto r = got.get();
    REQUIRE(r.first);
    CHECK(same_bytes(r.second, *b));
  }
  CHECK(c0.by_addr_sends() == 2);
}

TEST_CASE("a send by address that cannot be read fails the send and the receive, naming why",
          "[runtime][dataplane]") {
  comm_options o;
  o.timeout = std::chrono::milliseconds(2000);
  communicator s(0, 2, o), r(1, 2, o);
  auto pair = make_local_pair(1 << 16, o.timeout);
  s.attach(1, std::move(pair.first));
  r.attach(0, std::move(pair.second));
  std::string want;
  SECTION("the receiver cannot read the sender's memory") {
    s.set_peer_cma(1, 0, true); // the sender believes it can
    want = "its memory cannot be read here";
  }
  SECTION("the sender's process is gone") {
    pid_t child = ::fork();
    if (child == 0)
      ::_exit(0);
    REQUIRE(child > 0);
    ::waitpid(child, nullptr, 0);
    s.set_peer_cma(1, 0, true);
    r.set_peer_cma(0, static_cast<int32_t>(child), false);
    want = "from its memory";
  }
  REQUIRE(s.start());
  REQUIRE(r.start());
  auto t = values(0, 1 << 16, 5);
  bool posted_first = GENERATE(true, false);
  std::future<status> got;
  auto receive = [&] { return r.wait([&](completion d) { r.recv(0, 1, {}, d); }); };
  if (posted_first)
    got = std::async(std::launch::async, receive);
  auto sent = s.wait([&](completion d) { s.send(1, 1, t, d); });
  REQUIRE_FALSE(sent);
  // Posted after the failure, the receive must not take the frame whose bytes failed.
  auto st = posted_first ? got.get() : receive();
  REQUIRE_FALSE(st);
  CHECK_THAT(st.error(), Catch::Contains(want));
  CHECK(s.by_addr_sends() == 1);
  CHECK(r.early_bytes() == 0);
}


TEST_CASE("the all-reduce of tensors outside the arenas reads them in place by CMA, bit for "
          "bit as the ring, heap and registered tensors mixed",
          "[runtime][dataplane]") {
  two_meshes w;
  uint64_t done = 0;
  for (uint64_t n : {uint64_t{1}, uint64_t{7}, uint64_t{100003}, uint64_t{1} << 20}) {
    for (auto op : {reduce_op::sum, reduce_op::mean}) {
      auto salt = static_cast<uint32_t>(n + (op == reduce_op::mean));
      std::vector<buffer> t;
      for (int r = 0; r < 3; ++r) {
        // rank 1's tensor from its arena, the others' on the heap
        t.push_back(r == 1 ? w.c[1]->alloc(dtype::f32, n) : buffer::f32(n));
        auto v = values(r, n, salt);
        std::memcpy(t.back().data(), v.data(), v.bytes());
      }
      REQUIRE(w.c[1]->registered(t[1]));
      for (auto& st : w.allreduce(t, op)) {
        INFO((st ? std::string() : st.error()));
        REQUIRE(st);
      }
      ++done;
      for (int r = 0; r < 3; ++r)
        for (uint64_t k = 0; k < n; k += std::max<uint64_t>(n / 997, 1)) {
          float want = reference::ring_sum({0, 1, 2}, n, k, salt, op == reduce_op::mean);
          float got = t[static_cast<size_t>(r)][k];
          REQUIRE(std::memcmp(&want, &got, sizeof(float)) == 0);
        }
    }
  }
  for (auto* c : w.c)
    CHECK(c->in_place_allreduces() == done);
}

TEST_CASE("an all-reduce in place whose read of a member's memory fails ends with the reason on "
          "every member",
          "[runtime][dataplane]") {
  two_meshes w;
  pid_t child = ::fork();
  if (child == 0)
    ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  // Rank 0 believes rank 1 lives in a process that is gone (set before the call: the
  // collective thread reads it under the queue's lock).
  w.c[0]->set_peer_cma(1, static_cast<int32_t>(child), true);
  std::vector<buffer> t;
  for (int r = 0; r < 3; ++r)
    t.push_back(values(r, 100003, 3));
  auto st = w.allreduce(t, reduce_op::sum);
  REQUIRE_FALSE(st[0]);
  CHECK_THAT(st[0].error(), Catch::Contains("reading rank 1's tensor in the all-reduce")
                              && Catch::Contains("No such process"));
  REQUIRE_FALSE(st[1]);
  REQUIRE_FALSE(st[2]);
  CHECK(w.c[0]->in_place_allreduces() == 0);
}

TEST_CASE("a member that finished an all-reduce in place may end at once: the others still "
          "finish theirs",
          "[runtime][dataplane]") {
  // Rank 1 closes its links (as a process that exits) as soon as its call returns; ranks 0
  // and 2 may still be waiting for their own tensors to be read, and must not fail. Busy
  // threads beside them make the members wait for each other (and sleep) in most rounds.
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int k = 0; k < 3; ++k)
    busy.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed))
        ;
    });
  int failed = 0, in_place = 0;
  for (int round = 0; round < 30; ++round) {
    two_meshes w;
    std::vector<buffer> t;
    for (int r = 0; r < 3; ++r)
      t.push_back(values(r, 1 + 1000 * static_cast<uint64_t>(round % 3), 11));
    std::vector<std::future<status>> fs;
    for (int r = 0; r < 3; ++r)
      fs.push_back(std::async(std::launch::async, [&w, &t, r] {
        auto* c = w.c[r];
        auto st = c->wait([&](completion d) { c->allreduce(t[static_cast<size_t>(r)], reduce_op::sum, {}, d); });
        if (r == 1)
          w.b->close();
        return st;
      }));
    for (auto& f : fs) {
      auto st = f.get();
      if (!st) {
        ++failed;
        UNSCOPED_INFO(st.error());
      }
    }
    in_place += w.c[0]->in_place_allreduces() == 1;
  }
  stop = true;
  for (auto& b : busy)
    b.join();
  CHECK(failed == 0);
  CHECK(in_place == 30);
}
