// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/comm.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <dirent.h>
#include <future>
#include <set>
#include <thread>

#include "runtime/dataplane/arena.hpp"
#include "runtime/dataplane/mesh.hpp"
#include "runtime/dataplane/reference.hpp"
#include "runtime/dataplane/tcp_link.hpp"

using namespace monkey;
using namespace monkey::dp;

#define REQUIRE_OK(st)                                                                             \
  do {                                                                                             \
    auto&& ok_ = (st);                                                                             \
    INFO((ok_ ? std::string() : ok_.error()));                                                     \
    REQUIRE(ok_);                                                                                  \
  } while (false)

TEST_CASE("the ring's chunks cover every element once, uneven sizes first",
          "[runtime][dataplane]") {
  for (uint64_t total : {0ull, 1ull, 2ull, 5ull, 7ull, 64ull, 1000003ull})
    for (int n : {1, 2, 3, 4, 5, 7, 13}) {
      uint64_t next = 0, longest = 0, shortest = ~0ull;
      for (int c = 0; c < n; ++c) {
        auto s = ring_chunk(total, n, c);
        CHECK(s.first == next);
        next += s.count;
        longest = std::max(longest, s.count);
        shortest = std::min(shortest, s.count);
        for (uint64_t k = s.first; k < s.first + s.count && k < s.first + 3; ++k)
          CHECK(reference::chunk_of(total, n, k) == c);
      }
      CHECK(next == total);
      CHECK(longest - shortest <= 1);
    }
  CHECK(ring_chunk(7, 3, 0).count == 3);
  CHECK(ring_chunk(7, 3, 1).count == 2);
  CHECK(ring_chunk(7, 3, 2).first == 5);
}

TEST_CASE("the ring schedule: member i ends the reduce-scatter with chunk i, every chunk "
          "passes every member once", "[runtime][dataplane]") {
  for (int n : {1, 2, 3, 4, 5, 7}) {
    for (int i = 0; i < n; ++i) {
      // What member i receives at step s is what member i-1 sent at step s.
      for (int s = 0; s + 1 < n; ++s) {
        CHECK(reduce_scatter_step(i, n, s).recv_chunk
              == reduce_scatter_step((i + n - 1) % n, n, s).send_chunk);
        CHECK(allgather_step(i, n, s).recv_chunk
              == allgather_step((i + n - 1) % n, n, s).send_chunk);
        // A member sends on what it reduced the step before.
        if (s > 0)
          CHECK(reduce_scatter_step(i, n, s).send_chunk
                == reduce_scatter_step(i, n, s - 1).recv_chunk);
      }
      if (n > 1) {
        CHECK(reduce_scatter_step(i, n, n - 2).recv_chunk == i);
        CHECK(allgather_step(i, n, 0).send_chunk == i);
      }
      // Chunk c starts at member c+1 and reaches member c last.
      CHECK(reduce_scatter_step(ring_sum_start(i, n), n, 0).send_chunk == i);
    }
  }
}

TEST_CASE("add_f32 adds element by element at any length", "[runtime][dataplane]") {
  for (uint64_t n : {0ull, 1ull, 7ull, 8ull, 9ull, 1023ull}) {
    std::vector<float> d(n), s(n), want(n);
    for (uint64_t k = 0; k < n; ++k) {
      d[k] = reference::value(0, k, 1);
      s[k] = reference::value(1, k, 1);
      want[k] = d[k] + s[k];
    }
    add_f32(d.data(), s.data(), n);
    CHECK((n == 0 || std::memcmp(d.data(), want.data(), n * sizeof(float)) == 0));
  }
}

namespace {

/// `n` communicators in this process joined by local ring pairs.
std::vector<std::unique_ptr<communicator>> local_world(int n, uint64_t ring_bytes = 1 << 16,
                                                       uint64_t segment = 4096,
                                                       comm_options o = {}) {
  o.timeout = o.timeout == comm_options{}.timeout ? std::chrono::seconds(10) : o.timeout;
  o.segment_bytes = segment;
  std::vector<std::unique_ptr<communicator>> w;
  for (int r = 0; r < n; ++r)
    w.push_back(std::make_unique<communicator>(r, n, o));
  for (int r = 0; r < n; ++r)
    for (int p = r + 1; p < n; ++p) {
      auto pair = make_local_pair(ring_bytes, o.timeout);
      w[static_cast<size_t>(r)]->attach(p, std::move(pair.first));
      w[static_cast<size_t>(p)]->attach(r, std::move(pair.second));
    }
  for (auto& c : w)
    REQUIRE(c->start());
  return w;
}

/// Runs `op(rank)` on every rank at once; each returns its status.
template <class Op>
std::vector<status> on_all(int n, Op op) {
  std::vector<std::future<status>> fs;
  for (int r = 0; r < n; ++r)
    fs.push_back(std::async(std::launch::async, [&op, r] { return op(r); }));
  std::vector<status> out;
  for (auto& f : fs)
    out.push_back(f.get());
  return out;
}

buffer inputs(int32_t rank, uint64_t count, uint32_t salt) {
  auto b = buffer::f32(count);
  for (uint64_t k = 0; k < count; ++k)
    b[k] = reference::value(rank, k, salt);
  return b;
}

/// The same inputs in another element type (scaled to use its range).
buffer typed_inputs(dtype t, int32_t rank, uint64_t count, uint32_t salt) {
  buffer b(t, count);
  for (uint64_t k = 0; k < count; ++k) {
    float v = reference::value(rank, k, salt);
    void* at = static_cast<uint8_t*>(b.data()) + k * dtype_size(t);
    auto put = [&](auto x) { std::memcpy(at, &x, sizeof(x)); };
    switch (t) {
      case dtype::f32: put(v); break;
      case dtype::f64: put(static_cast<double>(v) * (1.0 + 1e-9 * static_cast<double>(k))); break;
      case dtype::i32: put(static_cast<int32_t>(v * 1000.0f)); break;
      case dtype::i64: put(static_cast<int64_t>(static_cast<double>(v) * 4e15)); break; // wraps
      case dtype::bf16: put(f32_to_bf16(v)); break;
      case dtype::f16: put(f32_to_f16(v / 8.0f)); break;
      case dtype::u8: put(static_cast<uint8_t>(k)); break;
    }
  }
  return b;
}

/// Element `k` of the ring all-reduce over `group` of `ins` (each rank's input), summed in
/// the ring's order with add_elems (reduce.test.cpp checks it), as bytes.
std::vector<uint8_t> typed_ring_sum(const std::vector<buffer>& ins, const std::vector<int32_t>& group,
                                    uint64_t k, bool mean) {
  auto t = ins[0].type();
  auto esz = dtype_size(t);
  auto n = static_cast<int>(group.size());
  auto at = [&](int j) {
    auto& b = ins[static_cast<size_t>(group[static_cast<size_t>(j)])];
    return static_cast<const uint8_t*>(b.data()) + k * esz;
  };
  int start = ring_sum_start(reference::chunk_of(ins[0].count(), n, k), n);
  std::vector<uint8_t> acc(at(start), at(start) + esz);
  for (int j = 1; j < n; ++j)
    add_elems(t, acc.data(), at((start + j) % n), 1);
  if (mean)
    divide_elems(t, acc.data(), 1, n);
  return acc;
}

} // namespace

TEST_CASE("point-to-point: tags match sends to receives in any order, a receive sized wrong "
          "is an error", "[runtime][dataplane]") {
  auto w = local_world(2);
  auto& a = *w[0];
  auto& b = *w[1];
  auto x = inputs(0, 1000, 1), y = inputs(0, 3, 2);
  // Sent tag 7 then 8; received 8 first (7 waits among the unexpected).
  REQUIRE(a.wait([&](completion d) { a.send(1, 7, x, d); }));
  REQUIRE(a.wait([&](completion d) { a.send(1, 8, y, d); }));
  auto got8 = buffer::f32(3);
  REQUIRE(b.wait([&](completion d) { b.recv(0, 8, got8, d); }));
  CHECK(std::memcmp(got8.data(), y.data(), y.bytes()) == 0);
  std::promise<buffer> p7;
  b.recv(0, 7, {}, [&](const status& st, buffer got) {
    CHECK(st);
    p7.set_value(got);
  });
  auto got7 = p7.get_future().get();
  REQUIRE(got7.count() == 1000);
  CHECK(std::memcmp(got7.data(), x.data(), x.bytes()) == 0);
  // A receive posted first gets the frame straight into its buffer.
  auto into = buffer::f32(1000);
  auto posted = std::async(std::launch::async,
                           [&] { return b.wait([&](completion d) { b.recv(0, 9, into, d); }); });
  REQUIRE(a.wait([&](completion d) { a.send(1, 9, x, d); }));
  REQUIRE(posted.get());
  CHECK(std::memcmp(into.data(), x.data(), x.bytes()) == 0);
  // Wrong size: an error that says both sizes; the link goes on working.
  REQUIRE(a.wait([&](completion d) { a.send(1, 10, y, d); }));
  auto wrong = b.wait([&](completion d) { b.recv(0, 10, buffer::f32(4), d); });
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.error(), Catch::Contains("sent 3 float32 elements under tag 10; the receive "
                                            "expected 4 float32"));
  REQUIRE(a.wait([&](completion d) { a.send(1, 11, y, d); }));
  CHECK(b.wait([&](completion d) { b.recv(0, 11, buffer::f32(3), d); }));
  // Out of range.
  CHECK_THAT(a.wait([&](completion d) { a.send(2, 1, y, d); }).error(),
             Catch::Contains("cannot send to rank 2"));
  CHECK_THAT(a.wait([&](completion d) { a.recv(5, 1, y, d); }).error(),
             Catch::Contains("cannot receive from rank 5"));
}

TEST_CASE("a rank sends to itself: copies matched by tag in order, before or after the "
          "receive, a wrong size is an error, closing fails a waiting receive",
          "[runtime][dataplane]") {
  auto w = local_world(2);
  auto& a = *w[0];
  auto x = inputs(0, 1000, 1), y = inputs(0, 3, 2);
  // Sent before the receive: a copy (the sender may reuse its tensor at once).
  REQUIRE(a.wait([&](completion d) { a.send(0, 4, x, d); }));
  REQUIRE(a.wait([&](completion d) { a.send(0, 4, y, d); })); // the same tag: in order
  x[0] += 1.0f;
  std::promise<buffer> first;
  a.recv(0, 4, {}, [&](const status& st, buffer got) {
    CHECK(st);
    first.set_value(got);
  });
  auto got = first.get_future().get();
  REQUIRE(got.count() == 1000);
  CHECK(got[0] + 1.0f == x[0]);
  CHECK(std::memcmp(static_cast<float*>(got.data()) + 1, static_cast<float*>(x.data()) + 1,
                    999 * sizeof(float)) == 0);
  auto into = buffer::f32(3);
  REQUIRE(a.wait([&](completion d) { a.recv(0, 4, into, d); }));
  CHECK(std::memcmp(into.data(), y.data(), y.bytes()) == 0);
  // Posted first: the send copies straight into it.
  auto posted = std::async(std::launch::async,
                           [&] { return a.wait([&](completion d) { a.recv(0, 5, into, d); }); });
  auto z = inputs(0, 3, 9);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(a.wait([&](completion d) { a.send(0, 5, z, d); }));
  REQUIRE(posted.get());
  CHECK(std::memcmp(into.data(), z.data(), z.bytes()) == 0);
  // A wrong size fails the receive, naming both.
  REQUIRE(a.wait([&](completion d) { a.send(0, 6, x, d); }));
  auto wrong = a.wait([&](completion d) { a.recv(0, 6, buffer::f32(4), d); });
  REQUIRE_FALSE(wrong);
  CHECK_THAT(wrong.error(), Catch::Contains("sent itself 1000 float32 elements under tag 6"));
  // A receive nothing answers ends when the communicator closes.
  auto waiting = std::async(std::launch::async,
                            [&] { return a.wait([&](completion d) { a.recv(0, 7, into, d); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  a.close();
  auto closed = waiting.get();
  REQUIRE_FALSE(closed);
  CHECK_THAT(closed.error(), Catch::Contains("closed"));
}

TEST_CASE("collectives in one process equal the ring-order reference bit for bit",
          "[runtime][dataplane]") {
  for (int n : {1, 2, 3, 4, 5}) {
    auto w = local_world(n);
    for (uint64_t count : {1ull, 2ull, 7ull, 1000ull, 100003ull}) {
      std::vector<int32_t> all;
      for (int r = 0; r < n; ++r)
        all.push_back(r);
      uint32_t salt = static_cast<uint32_t>(count * 31 + static_cast<uint64_t>(n));
      // allreduce sum and mean
      for (auto op : {reduce_op::sum, reduce_op::mean}) {
        std::vector<buffer> bufs;
        for (int r = 0; r < n; ++r)
          bufs.push_back(inputs(r, count, salt));
        auto st = on_all(n, [&](int r) {
          auto& c = *w[static_cast<size_t>(r)];
          return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], op, {}, d); });
        });
        for (auto& s : st)
          REQUIRE_OK(s);
        size_t bad = 0;
        for (int r = 0; r < n; ++r)
          for (uint64_t k = 0; k < count; ++k) {
            float want = reference::ring_sum(all, count, k, salt, op == reduce_op::mean);
            float got = bufs[static_cast<size_t>(r)][k];
            bad += std::memcmp(&want, &got, sizeof(float)) != 0;
          }
        INFO("n " << n << " count " << count);
        CHECK(bad == 0);
      }
      // broadcast from the last rank
      {
        std::vector<buffer> bufs;
        for (int r = 0; r < n; ++r)
          bufs.push_back(inputs(r, count, salt));
        auto root = n - 1;
        for (auto& s : on_all(n, [&](int r) {
               auto& c = *w[static_cast<size_t>(r)];
               return c.wait([&](completion d) { c.broadcast(bufs[static_cast<size_t>(r)], root, {}, d); });
             }))
          REQUIRE_OK(s);
        auto want = inputs(root, count, salt);
        for (auto& b : bufs)
          CHECK(std::memcmp(b.data(), want.data(), want.bytes()) == 0);
      }
      // reduce_scatter, then allgather of the pieces = allreduce
      {
        std::vector<buffer> ins, outs, full;
        for (int r = 0; r < n; ++r) {
          ins.push_back(inputs(r, count, salt));
          outs.push_back(buffer::f32(ring_chunk(count, n, r).count));
          full.push_back(buffer::f32(count));
        }
        for (auto& s : on_all(n, [&](int r) {
               auto& c = *w[static_cast<size_t>(r)];
               auto i = static_cast<size_t>(r); // (Catch's INFO is not for these threads)
               auto ok = c.wait([&](completion d) { c.reduce_scatter(ins[i], outs[i], reduce_op::sum, {}, d); });
               if (!ok)
                 return ok;
               return c.wait([&](completion d) { c.allgather(outs[i], full[i], {}, d); });
             }))
          REQUIRE_OK(s);
        size_t bad = 0;
        for (int r = 0; r < n; ++r)
          for (uint64_t k = 0; k < count; ++k) {
            float want = reference::ring_sum(all, count, k, salt);
            float got = full[static_cast<size_t>(r)][k];
            bad += std::memcmp(&want, &got, sizeof(float)) != 0;
          }
        INFO("n " << n << " count " << count);
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("a collective over a subset of ranks, the others go on with point-to-point",
          "[runtime][dataplane]") {
  auto w = local_world(5);
  std::vector<int32_t> group{4, 1, 3}; // any order: the ring follows it
  std::vector<buffer> bufs;
  for (int r = 0; r < 5; ++r)
    bufs.push_back(inputs(r, 999, 5));
  auto st = on_all(5, [&](int r) -> status {
    auto& c = *w[static_cast<size_t>(r)];
    if (r == 1 || r == 3 || r == 4)
      return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], reduce_op::sum, group, d); });
    if (r == 0)
      return c.wait([&](completion d) { c.send(2, 1, bufs[0], d); });
    return c.wait([&](completion d) { c.recv(0, 1, bufs[2], d); });
  });
  for (auto& s : st)
    REQUIRE_OK(s);
  for (int r : {1, 3, 4})
    for (uint64_t k = 0; k < 999; ++k) {
      float want = reference::ring_sum(group, 999, k, 5);
      float got = bufs[static_cast<size_t>(r)][k];
      INFO("rank " << r << " k " << k << " want " << want << " got " << got << " plain "
           << reference::value(4, k, 5) + reference::value(1, k, 5) + reference::value(3, k, 5));
      REQUIRE(std::memcmp(&want, &got, sizeof(float)) == 0);
    }
  auto sent = inputs(0, 999, 5);
  CHECK(std::memcmp(bufs[2].data(), sent.data(), sent.bytes()) == 0);
  // A group that leaves this rank out, or names a rank twice, is refused at once.
  CHECK_THAT(w[0]->wait([&](completion d) { w[0]->allreduce(bufs[0], reduce_op::sum, {1, 2}, d); }).error(),
             Catch::Contains("rank 0 is not in the group"));
  CHECK_THAT(w[0]->wait([&](completion d) { w[0]->allreduce(bufs[0], reduce_op::sum, {0, 2, 2}, d); }).error(),
             Catch::Contains("rank 2 twice"));
  CHECK_THAT(w[0]->wait([&](completion d) { w[0]->allreduce(buffer(dtype::u8, 4), reduce_op::sum, {}, d); }).error(),
             Catch::Contains("the buffer holds uint8"));
}

/// Ranks 0 and 1 of a world of two, joined by lanes in memory and started.
struct local_two {
  communicator a, b;
  explicit local_two(const comm_options& o) : a(0, 2, o), b(1, 2, o) {
    auto pair = make_local_pair(1 << 16, o.timeout);
    a.attach(1, std::move(pair.first));
    b.attach(0, std::move(pair.second));
    REQUIRE(a.start());
    REQUIRE(b.start());
  }
};

TEST_CASE("a closed peer fails the waiting receive at once, a silent one after the timeout",
          "[runtime][dataplane]") {
  comm_options o;
  o.timeout = std::chrono::milliseconds(400);
  local_two two(o);
  auto& a = two.a;
  auto& b = two.b;
  auto t0 = std::chrono::steady_clock::now();
  auto silent = a.wait([&](completion d) { a.recv(1, 3, buffer::f32(4), d); });
  auto waited = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(silent);
  CHECK_THAT(silent.error(), Catch::Contains("timed out"));
  CHECK(waited >= std::chrono::milliseconds(400));
  CHECK(waited < std::chrono::seconds(5));
  // The link is broken from then on: a send fails at once too.
  CHECK_FALSE(a.wait([&](completion d) { a.send(1, 3, buffer::f32(4), d); }));
  b.close();
}

TEST_CASE("alive: ok for itself and a working peer, a closed peer and a rank out of range "
          "say why",
          "[runtime][dataplane]") {
  comm_options o;
  o.timeout = std::chrono::milliseconds(2000);
  local_two two(o);
  auto& a = two.a;
  auto& b = two.b;
  CHECK(a.alive(0));
  CHECK(a.alive(1));
  CHECK(a.timeout() == std::chrono::milliseconds(2000));
  auto out = a.alive(2);
  REQUIRE_FALSE(out);
  CHECK_THAT(out.error(), Catch::Contains("no rank 2"));
  b.close();
  // The peer's close reaches a's receiving thread soon after.
  status gone;
  for (int k = 0; k < 200 && (gone = a.alive(1)); ++k)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE_FALSE(gone);
  CHECK_THAT(gone.error(), Catch::Contains("rank 1") || Catch::Contains("closed"));
}

TEST_CASE("shm between two meshes: frames cross, a wrong key is refused, no /dev/shm entry",
          "[runtime][dataplane]") {
  auto shm_entries = [] {
    std::set<std::string> out;
    if (auto* d = ::opendir("/dev/shm")) {
      while (auto* e = ::readdir(d))
        out.insert(e->d_name);
      ::closedir(d);
    }
    return out;
  };
  auto before = shm_entries();
  mesh_options o;
  o.key = "the-key";
  o.transport = "shm";
  o.timeout = std::chrono::seconds(5);
  o.connect_timeout = std::chrono::seconds(5);
  o.ring_bytes = 1 << 16;
  auto m0 = mesh::create(3, {0, 2}, o);
  auto m1 = mesh::create(3, {1}, o);
  REQUIRE(m0);
  REQUIRE(m1);
  std::vector<std::string> eps{(*m0)->endpoint(), (*m1)->endpoint()};
  auto joined = std::async(std::launch::async, [&] { return (*m1)->connect(eps); });
  REQUIRE((*m0)->connect(eps));
  REQUIRE(joined.get());
  CHECK((*m0)->comm(0)->transport(1) == "shm");
  CHECK((*m0)->comm(0)->transport(2) == "local");
  CHECK((*m1)->comm(1)->transport(2) == "shm");
  std::vector<buffer> bufs;
  for (int r = 0; r < 3; ++r)
    bufs.push_back(inputs(r, 300001, 9));
  communicator* cs[3] = {(*m0)->comm(0), (*m1)->comm(1), (*m0)->comm(2)};
  for (auto& s : on_all(3, [&](int r) {
         auto* c = cs[r];
         return c->wait([&](completion d) { c->allreduce(bufs[static_cast<size_t>(r)], reduce_op::sum, {}, d); });
       }))
    REQUIRE_OK(s);
  for (uint64_t k = 0; k < 300001; k += 997) {
    float want = reference::ring_sum({0, 1, 2}, 300001, k, 9);
    float got = bufs[1][k];
    REQUIRE(std::memcmp(&want, &got, sizeof(float)) == 0);
  }
  CHECK(shm_entries() == before);

  // A stranger with another key: refused, and the mesh's connect reports who did not join.
  o.connect_timeout = std::chrono::milliseconds(800);
  mesh_options bad = o;
  bad.key = "another-key";
  auto a = mesh::create(2, {0}, o);
  auto z = mesh::create(2, {1}, bad);
  REQUIRE(a);
  REQUIRE(z);
  std::vector<std::string> two{(*a)->endpoint(), (*z)->endpoint()};
  auto other = std::async(std::launch::async, [&] { return (*z)->connect(two); });
  auto mine = (*a)->connect(two);
  auto theirs = other.get();
  REQUIRE_FALSE(mine);
  CHECK_THAT(mine.error(), Catch::Contains("does not know this attempt's key"));
  REQUIRE_FALSE(theirs);
}

TEST_CASE("a failed collective closes its group's links: nothing lands in the tensor later",
          "[runtime][dataplane]") {
  auto w = local_world(3);
  // Rank 2 goes away: ranks 0 and 1 fail their all-reduce, and their link to each other is
  // closed too (the ring is out of step; receives of the failed call stay posted).
  w[2]->close();
  std::vector<buffer> bufs{inputs(0, 30000, 3), inputs(1, 30000, 3)};
  auto st = on_all(2, [&](int r) {
    auto& c = *w[static_cast<size_t>(r)];
    return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], reduce_op::sum, {}, d); });
  });
  REQUIRE_FALSE(st[0]);
  REQUIRE_FALSE(st[1]);
  auto before = bufs[0];
  auto copy = buffer::f32(30000);
  std::memcpy(copy.data(), before.data(), before.bytes());
  auto after = w[0]->wait([&](completion d) { w[0]->send(1, 5, buffer::f32(4), d); });
  REQUIRE_FALSE(after);
  CHECK_THAT(after.error(), Catch::Contains("closed"));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(std::memcmp(copy.data(), bufs[0].data(), copy.bytes()) == 0);
}

TEST_CASE("in-place reduce_scatter and allgather: the output is the rank's slice of one tensor",
          "[runtime][dataplane]") {
  for (int n : {2, 3}) {
    auto w = local_world(n);
    uint64_t count = 10007;
    std::vector<int32_t> all;
    for (int r = 0; r < n; ++r)
      all.push_back(r);
    std::vector<buffer> bufs;
    for (int r = 0; r < n; ++r)
      bufs.push_back(inputs(r, count, 11));
    for (auto& s : on_all(n, [&](int r) {
           auto& c = *w[static_cast<size_t>(r)];
           auto& b = bufs[static_cast<size_t>(r)];
           auto mine = ring_chunk(count, n, r);
           auto slice = b.slice(mine.first, mine.count);
           auto ok = c.wait([&](completion d) { c.reduce_scatter(b, slice, reduce_op::sum, {}, d); });
           if (!ok)
             return ok;
           return c.wait([&](completion d) { c.allgather(slice, b, {}, d); });
         }))
      REQUIRE_OK(s);
    size_t bad = 0;
    for (int r = 0; r < n; ++r)
      for (uint64_t k = 0; k < count; ++k) {
        float want = reference::ring_sum(all, count, k, 11);
        float got = bufs[static_cast<size_t>(r)][k];
        bad += std::memcmp(&want, &got, sizeof(float)) != 0;
      }
    CHECK(bad == 0);
  }
}

namespace {

/// Two ends of a keyed TCP connection on 127.0.0.1: the dialer's (rank `from`) and the
/// listener's.
std::pair<tcp_link, tcp_link> tcp_pair(tcp_listener& l, uint32_t from, uint32_t to) {
  const std::string key = "mixed-ring-key";
  auto dialed = std::async(std::launch::async, [&] {
    return tcp_link::dial(l.endpoint(), key, from, to, std::chrono::seconds(5));
  });
  auto accepted = l.accept(key, std::chrono::seconds(5));
  auto d = dialed.get();
  REQUIRE(d);
  REQUIRE(accepted);
  return {std::move(*d), std::move(*accepted)};
}

} // namespace

TEST_CASE("a ring over mixed channels (lanes in memory and over TCP, TCP frames) equals the "
          "reference bit for bit", "[runtime][dataplane]") {
  comm_options o;
  o.timeout = std::chrono::seconds(10);
  o.segment_bytes = 4096;
  const int n = 4;
  std::vector<std::unique_ptr<communicator>> w;
  for (int r = 0; r < n; ++r)
    w.push_back(std::make_unique<communicator>(r, n, o));
  auto local = [&](int a, int b) {
    auto pair = make_local_pair(1 << 16, o.timeout);
    w[static_cast<size_t>(a)]->attach(b, std::move(pair.first));
    w[static_cast<size_t>(b)]->attach(a, std::move(pair.second));
  };
  auto l = tcp_listener::listen("127.0.0.1");
  REQUIRE(l);
  auto tcp = [&](int a, int b, bool lane) {
    auto main = tcp_pair(*l, static_cast<uint32_t>(a), static_cast<uint32_t>(b));
    if (!lane) {
      w[static_cast<size_t>(a)]->attach(b, make_tcp_channel(std::move(main.first)));
      w[static_cast<size_t>(b)]->attach(a, make_tcp_channel(std::move(main.second)));
      return;
    }
    auto extra = tcp_pair(*l, static_cast<uint32_t>(a), static_cast<uint32_t>(b) | lane_bit);
    w[static_cast<size_t>(a)]->attach(b, make_tcp_channel(std::move(main.first), std::move(extra.first)));
    w[static_cast<size_t>(b)]->attach(a, make_tcp_channel(std::move(main.second), std::move(extra.second)));
  };
  // The ring 0 → 1 → 2 → 3 → 0: a lane in memory, a TCP lane, TCP frames, a lane in memory;
  // rank 2 receives on a lane and sends frames, rank 3 the other way round.
  local(0, 1);
  tcp(1, 2, true);
  tcp(2, 3, false);
  local(0, 3);
  tcp(0, 2, false);
  local(1, 3);
  for (auto& c : w)
    REQUIRE(c->start());
  CHECK(w[1]->transport(2) == "tcp");
  for (auto group : {std::vector<int32_t>{0, 1, 2, 3}, std::vector<int32_t>{3, 2, 1, 0},
                     std::vector<int32_t>{2, 3, 0}})
    for (uint64_t count : {1ull, 7ull, 1000ull, 100003ull})
      for (auto op : {reduce_op::sum, reduce_op::mean}) {
        std::vector<buffer> bufs;
        for (int r = 0; r < n; ++r)
          bufs.push_back(inputs(r, count, static_cast<uint32_t>(count)));
        auto in_group = [&](int r) {
          return std::find(group.begin(), group.end(), r) != group.end();
        };
        for (auto& s : on_all(n, [&](int r) -> status {
               if (!in_group(r))
                 return {};
               auto& c = *w[static_cast<size_t>(r)];
               return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], op, group, d); });
             }))
          REQUIRE_OK(s);
        size_t bad = 0;
        for (auto r : group)
          for (uint64_t k = 0; k < count; ++k) {
            float want = reference::ring_sum(group, count, k, static_cast<uint32_t>(count),
                                             op == reduce_op::mean);
            float got = bufs[static_cast<size_t>(r)][k];
            bad += std::memcmp(&want, &got, sizeof(float)) != 0;
          }
        INFO("group of " << group.size() << " from rank " << group[0] << ", count " << count);
        CHECK(bad == 0);
      }
  // An allgather of bytes (odd sizes) and then a float all-reduce: the lanes stay aligned.
  std::vector<buffer> outs;
  for (int r = 0; r < n; ++r)
    outs.push_back(buffer(dtype::u8, 13));
  for (auto& s : on_all(n, [&](int r) -> status {
         auto& c = *w[static_cast<size_t>(r)];
         auto mine = ring_chunk(13, n, r);
         auto in = buffer(dtype::u8, mine.count);
         for (uint64_t k = 0; k < mine.count; ++k)
           static_cast<uint8_t*>(in.data())[k] = static_cast<uint8_t>(mine.first + k + 1);
         auto ok = c.wait([&](completion d) { c.allgather(in, outs[static_cast<size_t>(r)], {}, d); });
         if (!ok)
           return ok;
         auto f = inputs(r, 999, 3);
         return c.wait([&](completion d) { c.allreduce(f, reduce_op::sum, {}, d); });
       }))
    REQUIRE_OK(s);
  for (int r = 0; r < n; ++r)
    for (uint64_t k = 0; k < 13; ++k)
      CHECK(static_cast<const uint8_t*>(outs[static_cast<size_t>(r)].data())[k] == k + 1);
  // Every other type that reduces, over the same mixed ring (lanes add torn elements whole).
  for (auto t : {dtype::f64, dtype::i32, dtype::i64, dtype::bf16, dtype::f16})
    for (auto group : {std::vector<int32_t>{0, 1, 2, 3}, std::vector<int32_t>{2, 3, 0}})
      for (uint64_t count : {1ull, 7ull, 100003ull})
        for (auto op : {reduce_op::sum, reduce_op::mean}) {
          if (op == reduce_op::mean && (t == dtype::i32 || t == dtype::i64))
            continue;
          std::vector<buffer> ins, bufs;
          for (int r = 0; r < n; ++r) {
            ins.push_back(typed_inputs(t, r, count, static_cast<uint32_t>(count) + 5));
            bufs.push_back(typed_inputs(t, r, count, static_cast<uint32_t>(count) + 5));
          }
          auto in_group = [&](int r) {
            return std::find(group.begin(), group.end(), r) != group.end();
          };
          for (auto& s : on_all(n, [&](int r) -> status {
                 if (!in_group(r))
                   return {};
                 auto& c = *w[static_cast<size_t>(r)];
                 return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], op, group, d); });
               }))
            REQUIRE_OK(s);
          size_t bad = 0;
          auto esz = dtype_size(t);
          for (auto r : group)
            for (uint64_t k = 0; k < count; ++k) {
              auto want = typed_ring_sum(ins, group, k, op == reduce_op::mean);
              bad += std::memcmp(want.data(),
                                 static_cast<const uint8_t*>(bufs[static_cast<size_t>(r)].data()) + k * esz,
                                 esz) != 0;
            }
          INFO(to_string(t) << ", group of " << group.size() << ", count " << count
                            << (op == reduce_op::mean ? ", mean" : ", sum"));
          CHECK(bad == 0);
        }
  // What does not reduce is refused before anything moves, naming the type.
  auto u8 = buffer(dtype::u8, 10);
  auto refused = w[0]->wait([&](completion d) { w[0]->allreduce(u8, reduce_op::sum, {}, d); });
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("the buffer holds uint8"));
  auto ints = buffer(dtype::i32, 10);
  refused = w[0]->wait([&](completion d) { w[0]->allreduce(ints, reduce_op::mean, {}, d); });
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("the mean is defined for floating types only"));
}

TEST_CASE("members in different collectives fail with the reason instead of mixing tensors",
          "[runtime][dataplane]") {
  auto w = local_world(2);
  auto a = inputs(0, 100, 1), b = inputs(1, 200, 1);
  auto st = on_all(2, [&](int r) {
    auto& c = *w[static_cast<size_t>(r)];
    return c.wait([&](completion d) { c.allreduce(r == 0 ? a : b, reduce_op::sum, {}, d); });
  });
  REQUIRE_FALSE(st[0]);
  REQUIRE_FALSE(st[1]);
  auto said = st[0].error() + " | " + st[1].error();
  CHECK_THAT(said, Catch::Contains("every member must call the same collectives in the same order"));
}

TEST_CASE("frames sent before their receive stay within their bound: the sender waits, and a "
          "send that no receive asks for fails the link naming its tag", "[runtime][dataplane]") {
  comm_options o;
  o.max_early_bytes = 64 << 10;
  o.timeout = std::chrono::milliseconds(1500);
  auto w = local_world(2, 1 << 16, 4096, o);
  auto& a = *w[0];
  auto& b = *w[1];
  const int frames = 12;
  std::vector<buffer> sent;
  std::vector<std::future<status>> done;
  for (int k = 0; k < frames; ++k) {
    sent.push_back(inputs(0, 8192, static_cast<uint32_t>(k))); // 32 KB each
    auto pr = std::make_shared<std::promise<status>>();
    done.push_back(pr->get_future());
    a.send(1, static_cast<uint32_t>(100 + k), sent.back(),
           [pr](const status& st, buffer) { pr->set_value(st); });
  }
  // Nobody receives yet: rank 1 keeps at most the bound (two frames), the rest wait in the
  // ring and in the sender's queue.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(b.early_bytes() <= o.max_early_bytes);
  CHECK(b.early_bytes() > 0);
  CHECK(done.back().wait_for(std::chrono::milliseconds(0)) != std::future_status::ready);
  // Received in order (within the timeout): every frame arrives whole.
  for (int k = 0; k < frames; ++k) {
    auto into = buffer::f32(8192);
    REQUIRE_OK(b.wait([&](completion d) { b.recv(0, static_cast<uint32_t>(100 + k), into, d); }));
    CHECK(std::memcmp(into.data(), sent[static_cast<size_t>(k)].data(), into.bytes()) == 0);
  }
  CHECK(b.early_bytes() == 0);
  for (auto& f : done)
    REQUIRE_OK(f.get());

  // Frames under tags 1..4, but the receiver waits for tag 4 first: tags 1 and 2 are kept,
  // tag 3 waits for a receive that never comes; the link fails after the timeout, naming it.
  for (int k = 1; k <= 4; ++k)
    a.send(1, static_cast<uint32_t>(k), inputs(0, 8192, 9), [](const status&, buffer) {});
  auto stuck = b.wait([&](completion d) { b.recv(0, 4, buffer::f32(8192), d); });
  REQUIRE_FALSE(stuck);
  CHECK_THAT(stuck.error(), Catch::Contains("sent a frame under tag 3"));
  CHECK_THAT(stuck.error(), Catch::Contains("does every send have its receive?"));
}

namespace {

/// `n` ranks of one process (local ring pairs) sharing one arena, as an app host's ranks do.
std::vector<std::unique_ptr<communicator>> registered_world(int n, std::shared_ptr<arena>& a,
                                                            comm_options o = {}) {
  auto made = arena::create(64 << 20);
  REQUIRE(made);
  a = *made;
  if (o.timeout == comm_options{}.timeout)
    o.timeout = std::chrono::seconds(10);
  o.segment_bytes = 4096;
  std::vector<std::unique_ptr<communicator>> w;
  for (int r = 0; r < n; ++r) {
    w.push_back(std::make_unique<communicator>(r, n, o));
    w.back()->use_arena(a);
  }
  std::shared_ptr<uint8_t> base(a, a->base());
  for (int r = 0; r < n; ++r)
    for (int p = r + 1; p < n; ++p) {
      auto pair = make_local_pair(1 << 16, o.timeout);
      w[static_cast<size_t>(r)]->attach(p, std::move(pair.first));
      w[static_cast<size_t>(p)]->attach(r, std::move(pair.second));
      w[static_cast<size_t>(r)]->set_peer_arena(p, base, a->bytes());
      w[static_cast<size_t>(p)]->set_peer_arena(r, base, a->bytes());
    }
  for (auto& c : w)
    REQUIRE(c->start());
  return w;
}

} // namespace

TEST_CASE("registered buffers: the all-reduce reads the others' tensors in place, bit for bit "
          "the ring's sum for every type, a group with one heap buffer takes the ring",
          "[runtime][dataplane]") {
  for (int n : {2, 3, 4, 5}) {
    std::shared_ptr<arena> a;
    auto w = registered_world(n, a);
    std::vector<int32_t> all;
    for (int r = 0; r < n; ++r)
      all.push_back(r);
    uint64_t in_place = 0;
    for (auto t : {dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::bf16, dtype::f16})
      for (uint64_t count : {1ull, 2ull, 7ull, 1000ull, 100003ull})
        for (auto op : {reduce_op::sum, reduce_op::mean})
          for (bool mixed : {false, true}) {
            if (op == reduce_op::mean && (t == dtype::i32 || t == dtype::i64))
              continue;
            auto salt = static_cast<uint32_t>(count * 13 + static_cast<uint64_t>(n));
            std::vector<buffer> ins, bufs;
            for (int r = 0; r < n; ++r) {
              ins.push_back(typed_inputs(t, r, count, salt));
              // mixed: the last rank's tensor is on the heap
              auto b = mixed && r == n - 1 ? buffer(t, count)
                                           : w[static_cast<size_t>(r)]->alloc(t, count);
              REQUIRE(w[static_cast<size_t>(r)]->registered(b) == !(mixed && r == n - 1));
              std::memcpy(b.data(), ins.back().data(), b.bytes());
              bufs.push_back(b);
            }
            for (auto& st : on_all(n, [&](int r) {
                   auto& c = *w[static_cast<size_t>(r)];
                   return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], op, {}, d); });
                 }))
              REQUIRE_OK(st);
            size_t bad = 0;
            auto esz = dtype_size(t);
            for (int r = 0; r < n; ++r)
              for (uint64_t k = 0; k < count; ++k) {
                auto want = typed_ring_sum(ins, all, k, op == reduce_op::mean);
                bad += std::memcmp(want.data(),
                                   static_cast<uint8_t*>(bufs[static_cast<size_t>(r)].data()) + k * esz,
                                   esz) != 0;
              }
            INFO("n " << n << " type " << to_string(t) << " count " << count << " mixed " << mixed);
            CHECK(bad == 0);
            if (!mixed)
              ++in_place;
          }
    // Every all-reduce of registered buffers went in place, none of the mixed ones.
    for (auto& c : w)
      CHECK(c->in_place_allreduces() == in_place);
  }
}

TEST_CASE("registered buffers: a group of some ranks in place while the others talk, members "
          "that disagree on the size fail with the reason, a closed member fails the others",
          "[runtime][dataplane]") {
  std::shared_ptr<arena> a;
  auto w = registered_world(4, a);
  // Ranks 3 and 1 (that order) all-reduce in place while 0 and 2 all-reduce on the heap.
  std::vector<buffer> bufs;
  for (int r = 0; r < 4; ++r) {
    auto b = r % 2 ? w[static_cast<size_t>(r)]->alloc(dtype::f32, 5000) : buffer::f32(5000);
    auto in = inputs(r, 5000, 9);
    std::memcpy(b.data(), in.data(), in.bytes());
    bufs.push_back(b);
  }
  for (int round = 0; round < 3; ++round)
    for (auto& st : on_all(4, [&](int r) {
           auto& c = *w[static_cast<size_t>(r)];
           std::vector<int32_t> g = r % 2 ? std::vector<int32_t>{3, 1} : std::vector<int32_t>{0, 2};
           return c.wait([&](completion d) { c.allreduce(bufs[static_cast<size_t>(r)], reduce_op::mean, g, d); });
         }))
      REQUIRE_OK(st);
  CHECK(w[1]->in_place_allreduces() == 3);
  CHECK(w[3]->in_place_allreduces() == 3);
  CHECK(w[0]->in_place_allreduces() == 0);
  // (the mean of two equal values is that value: after the first round they stay)
  for (uint64_t k = 0; k < 5000; k += 499) {
    CHECK(bufs[1][k] == bufs[3][k]);
    CHECK(bufs[0][k] == bufs[2][k]);
  }

  // Sizes that differ: both fail, naming the reason.
  auto x = w[1]->alloc(dtype::f32, 100), y = w[3]->alloc(dtype::f32, 200);
  auto st = on_all(2, [&](int k) {
    auto& c = *w[k == 0 ? 1 : 3];
    return c.wait([&](completion d) { c.allreduce(k == 0 ? x : y, reduce_op::sum, {1, 3}, d); });
  });
  REQUIRE_FALSE(st[0]);
  REQUIRE_FALSE(st[1]);
  CHECK_THAT(st[0].error() + st[1].error(),
             Catch::Contains("every member must call the same collectives in the same order"));

  // A member that closes while another waits for it: the waiter fails within a moment.
  auto z = w[0]->alloc(dtype::f32, 100);
  w[2]->close();
  auto t0 = std::chrono::steady_clock::now();
  auto alone = w[0]->wait([&](completion d) { w[0]->allreduce(z, reduce_op::sum, {0, 2}, d); });
  REQUIRE_FALSE(alone);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

TEST_CASE("registered tensors are sent by reference: one copy, done when the receiver has "
          "copied it, posted before or after, small and heap tensors go inline",
          "[runtime][dataplane]") {
  std::shared_ptr<arena> a;
  auto w = registered_world(2, a);
  auto& s = *w[0];
  auto& r = *w[1];
  const uint64_t n = 100000; // 400 KB: above MONKEY_DP_REF_KB's 64 KB
  auto t = s.alloc(dtype::f32, n);
  REQUIRE(s.registered(t));
  auto fill = [&](float base) {
    for (uint64_t k = 0; k < n; ++k)
      t.f32()[k] = base + static_cast<float>(k);
  };
  auto same = [&](const buffer& b, float base) {
    for (uint64_t k = 0; k < n; ++k)
      if (b.f32()[k] != base + static_cast<float>(k))
        return false;
    return true;
  };
  // Posted first, into a heap tensor.
  fill(1);
  auto in = buffer::f32(n);
  auto got = std::async(std::launch::async,
                        [&] { return r.wait([&](completion d) { r.recv(0, 7, in, d); }); });
  REQUIRE_OK(s.wait([&](completion d) { s.send(1, 7, t, d); }));
  REQUIRE_OK(got.get());
  CHECK(same(in, 1));
  // Sent before its receive (kept early), then again into a new tensor: the send completes
  // only once the bytes were copied, so refilling the tensor at once changes nothing.
  fill(2);
  REQUIRE_OK(s.wait([&](completion d) { s.send(1, 8, t, d); }));
  fill(3);
  REQUIRE_OK(s.wait([&](completion d) { s.send(1, 9, t, d); }));
  fill(4);
  buffer early, fresh;
  REQUIRE_OK(r.wait([&](completion d) {
    r.recv(0, 8, {}, [&, d](const status& st, buffer b) {
      early = b;
      d(st, {});
    });
  }));
  REQUIRE_OK(r.wait([&](completion d) {
    r.recv(0, 9, {}, [&, d](const status& st, buffer b) {
      fresh = b;
      d(st, {});
    });
  }));
  CHECK(same(early, 2));
  CHECK(same(fresh, 3));
  CHECK(s.by_ref_sends() == 3);
  // A receive of another size fails with the reason; the sender's copy still completes.
  auto wrong = std::async(std::launch::async, [&] {
    return r.wait([&](completion d) { r.recv(0, 10, buffer::f32(n - 1), d); });
  });
  REQUIRE_OK(s.wait([&](completion d) { s.send(1, 10, t, d); }));
  auto refused = wrong.get();
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("the receive expected 99999"));
  // Registered but small, or on the heap: inline frames.
  auto small = s.alloc(dtype::f32, 100);
  REQUIRE_OK(s.wait([&](completion d) { s.send(1, 11, small, d); }));
  REQUIRE_OK(s.wait([&](completion d) { s.send(1, 12, buffer::f32(n), d); }));
  REQUIRE_OK(r.wait([&](completion d) { r.recv(0, 11, {}, d); }));
  REQUIRE_OK(r.wait([&](completion d) { r.recv(0, 12, {}, d); }));
  CHECK(s.by_ref_sends() == 4);
}

TEST_CASE("sends by reference fail instead of hanging: a receiver that does not map the "
          "sender's arena refuses the frame, one that never copies it times out",
          "[runtime][dataplane]") {
  auto made = arena::create(16 << 20);
  REQUIRE(made);
  auto a = *made;
  std::shared_ptr<uint8_t> base(a, a->base());
  comm_options o;
  o.timeout = std::chrono::milliseconds(500);
  SECTION("no view of the sender's arena") {
    communicator s(0, 2, o), r(1, 2, o);
    s.use_arena(a);
    auto pair = make_local_pair(1 << 16, o.timeout);
    s.attach(1, std::move(pair.first));
    r.attach(0, std::move(pair.second));
    s.set_peer_arena(1, base, a->bytes()); // the sender believes the receiver maps its arena
    REQUIRE(s.start());
    REQUIRE(r.start());
    auto t = s.alloc(dtype::f32, 1 << 16);
    auto got = std::async(std::launch::async, [&] {
      return r.wait([&](completion d) { r.recv(0, 1, {}, d); });
    });
    auto sent = s.wait([&](completion d) { s.send(1, 1, t, d); });
    auto st = got.get();
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error(), Catch::Contains("its arena is not mapped here"));
    REQUIRE_FALSE(sent);
    // The link is broken: a send by reference fails at once, and its completion may call
    // the communicator again (it runs outside the peer's lock).
    auto again = s.wait([&](completion d) {
      s.send(1, 2, t, [&s, d](const status& first, buffer) {
        REQUIRE_FALSE(first);
        s.recv(1, 3, {}, d);
      });
    });
    REQUIRE_FALSE(again);
  }
  SECTION("a receiver that holds the frame and never copies it") {
    o.max_early_bytes = 1; // the first early frame is kept, the second waits
    std::shared_ptr<arena> shared;
    auto w = registered_world(2, shared, o);
    auto& s = *w[0];
    auto t1 = s.alloc(dtype::f32, 1 << 16), t2 = s.alloc(dtype::f32, 1 << 16);
    REQUIRE_OK(s.wait([&](completion d) { s.send(1, 1, t1, d); }));
    auto t0 = std::chrono::steady_clock::now();
    auto st = s.wait([&](completion d) { s.send(1, 2, t2, d); });
    REQUIRE_FALSE(st);
    CHECK_THAT(st.error(), Catch::Contains("timed out") || Catch::Contains("closed")
                             || Catch::Contains("went away"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  }
}

TEST_CASE("the arena: allocations are zeroed, aligned, given back and reused, a full arena "
          "says so and alloc falls back to the heap", "[runtime][dataplane]") {
  auto made = arena::create(arena_slot_bytes + (1 << 20));
  REQUIRE(made);
  auto a = *made;
  auto b1 = a->alloc(dtype::f32, 1000);
  REQUIRE(b1);
  CHECK(reinterpret_cast<uintptr_t>(b1->data()) % 4096 == 0);
  CHECK(a->offset_of(b1->data(), b1->bytes()) != not_registered);
  CHECK(a->offset_of(b1->data(), a->bytes()) == not_registered); // runs past the end
  for (uint64_t k = 0; k < 1000; ++k)
    CHECK((*b1)[k] == 0.0f);
  auto off1 = a->offset_of(b1->data(), 4);
  auto big = a->alloc(dtype::u8, 2 << 20);
  REQUIRE_FALSE(big);
  CHECK_THAT(big.error(), Catch::Contains("MONKEY_DP_ARENA_MB"));
  *b1 = buffer(); // the last copy gives the range back...
  auto b2 = a->alloc(dtype::f64, 10);
  REQUIRE(b2);
  CHECK(a->offset_of(b2->data(), 4) == off1); // ...and it is reused
  int x = 0;
  CHECK(a->offset_of(&x, sizeof(x)) == not_registered);

  communicator c(0, 1);
  c.use_arena(a);
  auto heap = c.alloc(dtype::f32, 1 << 20); // 4 MB: more than is left
  CHECK_FALSE(c.registered(heap));
  CHECK(heap.count() == 1u << 20);
  CHECK(c.registered(c.alloc(dtype::f32, 16)));
}

TEST_CASE("bytes written to a lane before its channel closed are still read, then the reader "
          "learns that it closed (a peer that wrote its last bytes and exited)",
          "[runtime][dataplane]") {
  auto pair = make_local_pair(1 << 16, std::chrono::seconds(5));
  auto* out = pair.first->collective_lane();
  auto* in = pair.second->collective_lane();
  REQUIRE(out);
  REQUIRE(in);
  std::vector<uint8_t> sent(1000), got(1000);
  for (size_t k = 0; k < sent.size(); ++k)
    sent[k] = static_cast<uint8_t>(k * 7);
  auto put = out->try_write(sent.data(), sent.size());
  REQUIRE(put);
  REQUIRE(*put == sent.size());
  pair.first->shutdown(); // the writer goes away; its bytes stay in the ring
  CHECK_FALSE(in->alive());
  REQUIRE(in->wait(true, std::chrono::microseconds(0))); // data waits: not an error yet
  auto r = in->try_read(got.data(), got.size(), std::nullopt);
  REQUIRE(r);
  CHECK(*r == got.size());
  CHECK(got == sent);
  auto more = in->try_read(got.data(), 1, std::nullopt);
  REQUIRE_FALSE(more);
  CHECK_THAT(more.error(), Catch::Contains("closed"));
  CHECK_FALSE(in->wait(true, std::chrono::microseconds(0)));
  CHECK_FALSE(out->try_write(sent.data(), 1)); // nobody reads what it would write
}
