// SPDX-License-Identifier: Apache-2.0
#include "runtime/checkpoint/store.hpp"

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/checkpoint/transfer.hpp"
#include "runtime/dataplane/tls_channel.hpp"
#include "runtime/net/certs.hpp"

namespace fs = std::filesystem;
using namespace monkey;
using namespace monkey::ckpt;

namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/monkey-ckpt-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary) << data;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const std::string job = "01M8VX5CMJTT7MTJ5SXMN5A6EE"; // a job id's text

manifest piece(int64_t step, uint64_t serial, int32_t world = 0) {
  manifest m;
  m.job = job;
  m.step = step;
  m.serial = serial;
  m.world = world;
  return m;
}

manifest ranks_piece(int64_t step, uint64_t serial, int32_t world, std::vector<int> ranks) {
  auto m = piece(step, serial, world);
  for (auto r : ranks)
    m.files.push_back({"rank-" + std::to_string(r), 1, ""});
  return m;
}

} // namespace

TEST_CASE("a committed piece lists with its files, sizes and hashes", "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 1 << 20);
  fs::create_directories(t.path + "/src/sub");
  write(t.path + "/src/model.bin", "weights");
  write(t.path + "/src/opt.bin", "moments!");
  write(t.path + "/src/sub/ignored", "x");
  auto m = s.commit_dir(piece(10, 1), t.path + "/src", false);
  REQUIRE(m);
  REQUIRE(m->files.size() == 2);
  CHECK(m->files[0].name == "model.bin");
  CHECK(m->files[0].size == 7);
  CHECK(m->files[0].sha256 == *file_sha256(t.path + "/src/model.bin"));
  CHECK(m->bytes() == 15);
  auto all = s.list(job);
  REQUIRE(all.size() == 1);
  CHECK(all[0].step == 10);
  CHECK(read(s.dir_of(all[0]) + "/opt.bin") == "moments!");
  CHECK(fs::exists(t.path + "/src/model.bin")); // copied, not moved
}

TEST_CASE("the same piece received twice, also at once, is kept whole and both succeed",
          "[runtime][checkpoint]") {
  // Two jobs continuing from one checkpoint fetch it to the same node at the same time.
  temp_dir t;
  store s(t.path + "/store", 1 << 20);
  fs::create_directories(t.path + "/src");
  write(t.path + "/src/score", "1.25");
  auto m = s.commit_dir(piece(8, 3), t.path + "/src", false);
  REQUIRE(m);
  auto receive = [&] {
    auto dir = s.begin_receive(*m);
    REQUIRE(dir);
    write(*dir + "/score", "1.25");
    return *dir;
  };
  // Again when it is here: the copy here stays (a restore may be reading it), the new goes.
  struct stat before {};
  REQUIRE(::stat((s.dir_of(*m) + "/score").c_str(), &before) == 0);
  auto again = receive();
  auto got = s.finish_receive(*m, again);
  REQUIRE(got);
  struct stat after {};
  REQUIRE(::stat((s.dir_of(*m) + "/score").c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);
  CHECK_FALSE(fs::exists(again));
  // Two at once, many times over, on a fresh piece each time.
  for (int round = 0; round < 50; ++round) {
    auto p = *m;
    p.step = 100 + round;
    auto first = s.begin_receive(p), second = s.begin_receive(p);
    REQUIRE(first);
    REQUIRE(second);
    write(*first + "/score", "1.25");
    write(*second + "/score", "1.25");
    expected<manifest> a = failure{"not run"}, b = failure{"not run"};
    std::thread one([&] { a = s.finish_receive(p, *first); });
    std::thread two([&] { b = s.finish_receive(p, *second); });
    one.join();
    two.join();
    INFO((a ? std::string() : a.error()) << " / " << (b ? std::string() : b.error()));
    CHECK(a);
    CHECK(b);
    CHECK(s.has(p));
    CHECK(read(s.dir_of(p) + "/score") == "1.25");
  }
}

TEST_CASE("a piece over the size limit is refused and leaves nothing", "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 10);
  fs::create_directories(t.path + "/src");
  write(t.path + "/src/big", std::string(11, 'x'));
  auto m = s.commit_dir(piece(1, 1), t.path + "/src", true);
  REQUIRE_FALSE(m);
  CHECK(m.error().find("over this node's limit of 10 bytes") != std::string::npos);
  CHECK(s.list(job).empty());
  CHECK(fs::exists(t.path + "/src/big"));
}

TEST_CASE("a piece without its manifest or with a truncated file does not count",
          "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 1 << 20);
  fs::create_directories(t.path + "/src");
  write(t.path + "/src/a", "0123456789");
  auto m1 = s.commit_dir(piece(1, 1), t.path + "/src", false);
  auto m2 = s.commit_dir(piece(2, 2), t.path + "/src", false);
  REQUIRE(m1);
  REQUIRE(m2);
  REQUIRE(s.list(job).size() == 2);
  // A crash between the files and the manifest: no MANIFEST.
  fs::remove(s.dir_of(*m2) + "/MANIFEST");
  CHECK(s.list(job).size() == 1);
  // A truncated file (a disk that lost a write).
  ::truncate((s.dir_of(*m1) + "/a").c_str(), 3);
  CHECK(s.list(job).empty());
  CHECK_FALSE(s.has(*m1));
  // A corrupt manifest.
  write(s.dir_of(*m1) + "/MANIFEST", "\xc1 garbage");
  CHECK(s.list(job).empty());
}

TEST_CASE("ids that are not job ids and file names with paths are refused",
          "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 1 << 20);
  auto m = piece(1, 1);
  m.job = "../etc";
  CHECK_FALSE(s.commit_dir(m, t.path, false));
  CHECK_FALSE(s.begin_receive(m));
  auto bad = piece(1, 1);
  bad.files.push_back({"../x", 1, ""});
  CHECK_FALSE(s.begin_receive(bad));
  CHECK_FALSE(valid_file_name("MANIFEST"));
  CHECK_FALSE(valid_file_name(".hidden"));
  CHECK(valid_file_name("rank-0"));
}

TEST_CASE("idle jobs are those of which nothing was written for the given age",
          "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 1 << 20);
  fs::create_directories(t.path + "/src");
  write(t.path + "/src/model.bin", "weights");
  REQUIRE(s.commit_dir(piece(1, 1), t.path + "/src", false));
  auto bundle = piece(0, 2);
  bundle.job = "ship-" + std::string(64, 'a');
  REQUIRE(s.commit_dir(bundle, t.path + "/src", false));
  CHECK(s.idle_jobs(std::chrono::hours(1)).empty()); // both just written
  auto age = [&](const std::string& job, std::chrono::hours h) {
    auto when = fs::file_time_type::clock::now() - h;
    for (auto& p : fs::recursive_directory_iterator(t.path + "/store/" + job))
      fs::last_write_time(p.path(), when);
    fs::last_write_time(t.path + "/store/" + job, when);
  };
  age(bundle.job, std::chrono::hours(2));
  CHECK(s.idle_jobs(std::chrono::hours(1)) == std::vector<std::string>{bundle.job});
  CHECK(s.idle_jobs(std::chrono::hours(3)).empty());
  // One file written lately keeps its job: a piece being completed, a copy just received.
  age(job, std::chrono::hours(2));
  auto dir = s.dir_of(s.list(job)[0]);
  fs::last_write_time(dir + "/model.bin", fs::file_time_type::clock::now());
  CHECK(s.idle_jobs(std::chrono::hours(1)) == std::vector<std::string>{bundle.job});
  age(job, std::chrono::hours(2));
  CHECK(s.idle_jobs(std::chrono::hours(1)).size() == 2);
  // Touched (listed for a client or a restore): in use again.
  s.touch(bundle.job);
  CHECK(s.idle_jobs(std::chrono::hours(1)) == std::vector<std::string>{job});
  age(bundle.job, std::chrono::hours(2));
  // Something in the store's root that is not a job's directory is never a candidate.
  write(t.path + "/store/not-a-dir", "x");
  fs::create_directories(t.path + "/store/.hidden");
  fs::last_write_time(t.path + "/store/.hidden", fs::file_time_type::clock::now() - std::chrono::hours(5));
  CHECK(s.idle_jobs(std::chrono::hours(1)).size() == 2);
}

TEST_CASE("the restore plan takes the newest step whose pieces cover every rank",
          "[runtime][checkpoint]") {
  SECTION("command jobs: the newest piece") {
    auto plan = plan_restore({piece(5, 1), piece(9, 2), piece(9, 3), piece(7, 4)});
    CHECK(plan.step == 9);
    REQUIRE(plan.pieces.size() == 1);
    CHECK(plan.pieces[0].serial == 3);
  }
  SECTION("apps: a step is complete when its pieces hold every rank") {
    std::vector<manifest> all{
      ranks_piece(10, 1, 4, {0, 1}), ranks_piece(10, 2, 4, {2, 3}), // step 10: whole
      ranks_piece(20, 3, 4, {0, 1}),                                // step 20: half
    };
    auto plan = plan_restore(all);
    CHECK(plan.step == 10);
    CHECK(plan.pieces.size() == 2);
    all.push_back(ranks_piece(20, 4, 4, {2, 3}));
    plan = plan_restore(all);
    CHECK(plan.step == 20);
    CHECK(plan.pieces.size() == 2);
  }
  SECTION("the same piece from two nodes is taken once") {
    std::vector<manifest> all{ranks_piece(3, 1, 2, {0, 1}), ranks_piece(3, 1, 2, {0, 1})};
    auto plan = plan_restore(all);
    CHECK(plan.step == 3);
    CHECK(plan.pieces.size() == 1);
  }
  SECTION("nothing complete: no plan") {
    CHECK(plan_restore({ranks_piece(3, 1, 3, {0, 1})}).step == -1);
    CHECK(plan_restore({}).step == -1);
  }
}

TEST_CASE("prune keeps the newest complete steps and a newer step being completed",
          "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 1 << 20, 2);
  fs::create_directories(t.path + "/src");
  write(t.path + "/src/rank-0", "r0");
  for (int step = 1; step <= 4; ++step)
    REQUIRE(s.commit_dir(piece(step, static_cast<uint64_t>(step), 1), t.path + "/src", false));
  fs::remove(t.path + "/src/rank-0");
  write(t.path + "/src/rank-1", "r1");
  // Step 5 holds rank 1 of 2 only: not complete, but kept (its other half may come).
  auto p5 = piece(5, 5, 2);
  REQUIRE(s.commit_dir(p5, t.path + "/src", false));
  CHECK(s.prune(job) == 2);
  auto left = s.list(job);
  REQUIRE(left.size() == 3);
  CHECK(left[0].step == 3);
  CHECK(left[1].step == 4);
  CHECK(left[2].step == 5);
}

TEST_CASE("prune bounds a node that holds only its own host's pieces", "[runtime][checkpoint]") {
  temp_dir t;
  store s(t.path + "/store", 1 << 20, 2);
  fs::create_directories(t.path + "/src");
  write(t.path + "/src/rank-2", "r2");
  for (int step = 1; step <= 6; ++step) // ranks 2 of 4: never complete here
    REQUIRE(s.commit_dir(piece(step, static_cast<uint64_t>(step), 4), t.path + "/src", false));
  CHECK(s.prune(job) == 3);
  auto left = s.list(job);
  REQUIRE(left.size() == 3);
  CHECK(left[0].step == 4);
  CHECK(left[2].step == 6);
}

TEST_CASE("pieces move between stores over a socket with a ticket",
          "[runtime][checkpoint][transfer]") {
  temp_dir t;
  store a(t.path + "/a", 64 << 20);
  store b(t.path + "/b", 64 << 20);
  fs::create_directories(t.path + "/src");
  std::string big(5 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 2654435761u >> 13);
  write(t.path + "/src/rank-0", big);
  write(t.path + "/src/rank-1", "");
  auto m = a.commit_dir(piece(7, 11, 2), t.path + "/src", false);
  REQUIRE(m);
  blob_server server(a);
  auto ep = server.start("127.0.0.1");
  REQUIRE(ep);

  SECTION("a granted ticket fetches the piece whole") {
    auto got = pull(b, *ep, server.grant(*m), *m);
    REQUIRE(got);
    REQUIRE(b.list(job).size() == 1);
    CHECK(read(b.dir_of(*m) + "/rank-0") == big);
    CHECK(read(b.dir_of(*m) + "/rank-1").empty());
    CHECK(server.served() == 1);
    // Again: already here, nothing moves.
    CHECK(pull(b, *ep, "whatever", *m));
    CHECK(server.served() == 1);
  }
  SECTION("a wrong ticket is refused and leaves nothing") {
    auto good = server.grant(*m);
    auto id = good.substr(0, good.find('.'));
    // A real id with another secret: the proof fails, the secret never crossed the wire.
    auto got = pull(b, *ep, id + ".0123456789abcdef0123456789abcdef", *m);
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("does not know the ticket's secret"));
    // An id never granted.
    auto other = (id == "00000001" ? std::string("00000002") : std::string("00000001"));
    got = pull(b, *ep, other + "." + good.substr(good.find('.') + 1), *m);
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("unknown or expired ticket"));
    got = pull(b, *ep, "0123456789abcdef0123456789abcdef", *m);
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("malformed ticket"));
    CHECK(b.list(job).empty());
    CHECK(server.served() == 0);
  }
  SECTION("an expired ticket is refused") {
    auto t = server.grant(*m, std::chrono::seconds(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    auto got = pull(b, *ep, t, *m);
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("unknown or expired ticket"));
  }
  SECTION("a file removed at the source is refused with its name") {
    auto t = server.grant(*m);
    fs::remove(a.dir_of(*m) + "/rank-1");
    auto got = pull(b, *ep, t, *m);
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("rank-1 is missing or changed"));
    CHECK(b.list(job).empty());
  }
  SECTION("a file corrupted at the source is detected") {
    auto ticket = server.grant(*m);
    {
      std::fstream f(a.dir_of(*m) + "/rank-0", std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(12345);
      f.put(static_cast<char>(big[12345] ^ 0x55));
    }
    auto got = pull(b, *ep, ticket, *m);
    REQUIRE_FALSE(got);
    CHECK(got.error().find("arrived corrupt") != std::string::npos);
    CHECK(b.list(job).empty());
  }
  SECTION("a missing server is an error naming the endpoint") {
    server.stop();
    auto got = pull(b, *ep, server.grant(*m), *m, nullptr, std::chrono::milliseconds(500));
    REQUIRE_FALSE(got);
    CHECK(got.error().find(*ep) != std::string::npos);
  }
  SECTION("copy_out restores the files and checks them") {
    REQUIRE(copy_out(a, *m, t.path + "/restore"));
    CHECK(read(t.path + "/restore/rank-0") == big);
    std::fstream f(a.dir_of(*m) + "/rank-0", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1);
    f.put(static_cast<char>(big[1] ^ 0x55));
    f.close();
    auto bad = copy_out(a, *m, t.path + "/restore2");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().find("corrupt") != std::string::npos);
  }
}

TEST_CASE("pieces move over TLS on a --tls cluster", "[runtime][checkpoint][transfer]") {
  temp_dir t;
  auto certs = [&](const std::string& dir) {
    REQUIRE(make_certs({dir, {"node"}, 30, false}));
    auto ctx = dp::make_tls_context(tls_files_in(dir, "node"));
    REQUIRE(ctx);
    return *ctx;
  };
  auto tls = certs(t.path + "/certs");
  auto foreign = certs(t.path + "/other-ca");
  store a(t.path + "/a", 64 << 20);
  store b(t.path + "/b", 64 << 20);
  fs::create_directories(t.path + "/src");
  std::string big(9 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<char>(i * 2654435761u >> 11);
  write(t.path + "/src/rank-0", big);
  auto m = a.commit_dir(piece(7, 3, 1), t.path + "/src", false);
  REQUIRE(m);
  blob_server server(a, tls);
  auto ep = server.start("127.0.0.1");
  REQUIRE(ep);

  SECTION("a node with the cluster's certificate fetches the piece whole") {
    REQUIRE(pull(b, *ep, server.grant(*m), *m, tls));
    CHECK(read(b.dir_of(*m) + "/rank-0") == big);
    CHECK(server.served() == 1);
  }
  SECTION("a certificate of another CA fails the handshake and leaves nothing") {
    auto got = pull(b, *ep, server.grant(*m), *m, foreign, std::chrono::milliseconds(3000));
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("TLS handshake failed"));
    CHECK(b.list(job).empty());
  }
  SECTION("a plain server answers a TLS client with an error, not a hang") {
    blob_server plain(a);
    auto pep = plain.start("127.0.0.1");
    REQUIRE(pep);
    auto got = pull(b, *pep, plain.grant(*m), *m, tls, std::chrono::milliseconds(3000));
    REQUIRE_FALSE(got);
    CHECK_THAT(got.error(), Catch::Contains("TLS handshake failed"));
  }
}
