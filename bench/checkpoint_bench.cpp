// SPDX-License-Identifier: Apache-2.0
// Checkpoint save + replicate against a plain file copy on the same disk (issue #10), side
// by side in one run, medians of ROUNDS. For each size:
//   copy       cp-like: read the file, write a copy, fsync it (the floor for any save); timed
//              before and after each round's checkpoint, the faster one counts
//   save       the node's store: copy into the store with SHA-256, fsync, MANIFEST, rename
//   replicate  a holder fetches the piece from the node's blob server over loopback TCP,
//              checks its SHA-256 and stores it durably (what a holder does before it counts)
//   total      save + replicate: what an app's save_checkpoint waits for with R = 2
// Prints one line per size and one JSON line at the end.
//   checkpoint_bench [DIR] [ROUNDS] [SIZES_MB...]    (default: /tmp 3 100 1000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fcntl.h>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/transfer.hpp"
#include "runtime/dataplane/tls_channel.hpp"
#include "runtime/net/certs.hpp"

using namespace monkey;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void make_file(const std::string& path, size_t mb) {
  std::vector<uint64_t> buf((1 << 20) / 8);
  std::mt19937_64 rng(42);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  for (size_t i = 0; i < mb; ++i) {
    for (auto& x : buf)
      x = rng();
    if (::write(fd, buf.data(), buf.size() * 8) < 0)
      std::perror("write");
  }
  ::fsync(fd);
  ::close(fd);
}

double plain_copy(const std::string& from, const std::string& to) {
  auto t = clock_type::now();
  std::vector<char> buf(1 << 20);
  int in = ::open(from.c_str(), O_RDONLY);
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ssize_t n;
  while ((n = ::read(in, buf.data(), buf.size())) > 0)
    if (::write(out, buf.data(), static_cast<size_t>(n)) != n)
      std::perror("write");
  ::fsync(out);
  ::close(in);
  ::close(out);
  return seconds_since(t);
}

} // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<size_t> sizes;
  for (int i = 3; i < argc; ++i)
    sizes.push_back(static_cast<size_t>(std::atoll(argv[i])));
  if (sizes.empty())
    sizes = {100, 1000};
  auto root = dir + "/monkey-ckpt-bench-" + std::to_string(::getpid());
  fs::create_directories(root + "/src");
  ckpt::store a(root + "/a", 64ull << 30, 1);
  ckpt::store b(root + "/b", 64ull << 30, 1);
  ckpt::blob_server server(a);
  auto ep = server.start("127.0.0.1");
  // The same transfer on a --tls cluster: certificates of a CA made for the run.
  if (!make_certs({root + "/certs", {"node"}, 1, false})) {
    std::fprintf(stderr, "cannot make certificates\n");
    return 1;
  }
  auto tls = dp::make_tls_context(tls_files_in(root + "/certs", "node"));
  if (!tls) {
    std::fprintf(stderr, "%s\n", tls.error().c_str());
    return 1;
  }
  ckpt::blob_server tls_server(a, *tls);
  auto tls_ep = tls_server.start("127.0.0.1");
  if (!ep || !tls_ep) {
    std::fprintf(stderr, "%s\n", (!ep ? ep.error() : tls_ep.error()).c_str());
    return 1;
  }
  std::string json = "[";
  int64_t step = 0;
  for (auto mb : sizes) {
    auto src = root + "/src/rank-0";
    make_file(src, mb);
    std::vector<double> copy, save, repl, repl_tls;
    for (int r = 0; r < rounds; ++r) {
      copy.push_back(plain_copy(src, root + "/copy.bin"));
      fs::remove(root + "/copy.bin");
      ckpt::manifest m;
      m.job = "01M8VX5CMJTT7MTJ5SXMN5A6EE";
      m.step = ++step;
      m.serial = static_cast<uint64_t>(step);
      m.world = 1;
      auto t = clock_type::now();
      auto piece = a.commit_dir(m, root + "/src", false);
      save.push_back(seconds_since(t));
      if (!piece) {
        std::fprintf(stderr, "save: %s\n", piece.error().c_str());
        return 1;
      }
      t = clock_type::now();
      auto got = ckpt::pull(b, *ep, server.grant(*piece), *piece);
      repl.push_back(seconds_since(t));
      if (!got) {
        std::fprintf(stderr, "replicate: %s\n", got.error().c_str());
        return 1;
      }
      b.forget(m.job);
      t = clock_type::now();
      got = ckpt::pull(b, *tls_ep, tls_server.grant(*piece), *piece, *tls);
      repl_tls.push_back(seconds_since(t));
      if (!got) {
        std::fprintf(stderr, "replicate over TLS: %s\n", got.error().c_str());
        return 1;
      }
      a.prune(m.job);
      b.prune(m.job);
      // The copy again after the checkpoint's writes: the faster of the two counts (the
      // disk's write-back of one step can slow the next, whichever it is).
      copy.back() = std::min(copy.back(), plain_copy(src, root + "/copy.bin"));
      fs::remove(root + "/copy.bin");
    }
    double c = median(copy), s = median(save), p = median(repl), pt = median(repl_tls);
    auto mbps = [&](double secs) { return static_cast<double>(mb) / secs; };
    std::printf("%5zu MB: copy %7.1f MB/s | save %7.1f MB/s (%.2fx copy) | replicate %7.1f MB/s "
                "(%.2fx copy) | save+replicate %7.1f MB/s (%.2fx copy) | replicate over TLS "
                "%7.1f MB/s (%.2fx plain)\n",
                mb, mbps(c), mbps(s), mbps(s) / mbps(c), mbps(p), mbps(p) / mbps(c),
                mbps(s + p), mbps(s + p) / mbps(c), mbps(pt), mbps(pt) / mbps(p));
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "%s{\"mb\": %zu, \"copy_mbps\": %.1f, \"save_mbps\": %.1f, "
                  "\"replicate_mbps\": %.1f, \"total_mbps\": %.1f, \"replicate_tls_mbps\": %.1f}",
                  json.size() > 1 ? ", " : "", mb, mbps(c), mbps(s), mbps(p), mbps(s + p),
                  mbps(pt));
    json += buf;
    fs::remove(src);
  }
  std::printf("%s]\n", json.c_str());
  server.stop();
  tls_server.stop();
  fs::remove_all(root);
  return 0;
}
