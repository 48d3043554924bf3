// SPDX-License-Identifier: Apache-2.0
#include "runtime/ship/bundle.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace monkey;
using namespace monkey::ship;

namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/monkey-ship-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> rels(const listing& l) {
  std::vector<std::string> out;
  for (auto& f : l.files)
    out.push_back(f.rel);
  return out;
}

} // namespace

TEST_CASE("bundle paths: only plain relative paths are safe", "[ship]") {
  CHECK(safe_path("a"));
  CHECK(safe_path("a/b/c.py"));
  CHECK(safe_path(".hidden/x"));
  CHECK_FALSE(safe_path(""));
  CHECK_FALSE(safe_path("/etc/passwd"));
  CHECK_FALSE(safe_path("../x"));
  CHECK_FALSE(safe_path("a/../../x"));
  CHECK_FALSE(safe_path("a//b"));
  CHECK_FALSE(safe_path("a/./b"));
  CHECK_FALSE(safe_path("a/"));
  CHECK_FALSE(safe_path(std::string("a\0b", 3)));
}

TEST_CASE("a directory round-trips through a bundle, deterministically", "[ship]") {
  temp_dir src, out1, out2;
  write(src.path + "/train.py", "print('hi')\n");
  write(src.path + "/data/sub/x.bin", std::string(3 << 20, '\x07')); // several read chunks
  write(src.path + "/empty", "");
  write(src.path + "/run.sh", "#!/bin/sh\necho ok\n");
  ::chmod((src.path + "/run.sh").c_str(), 0755);
  fs::create_directories(src.path + "/nothing-here");
  fs::create_symlink(src.path + "/data", src.path + "/data-link"); // a directory: skipped
  fs::create_symlink("train.py", src.path + "/alias.py");          // a file: followed

  auto l = list_dir(src.path, 1ull << 30);
  REQUIRE(l);
  CHECK(rels(*l) == std::vector<std::string>{"alias.py", "data/sub/x.bin", "empty", "run.sh",
                                             "train.py"});
  REQUIRE(l->skipped.size() == 1);
  CHECK(l->skipped[0].find("data-link") != std::string::npos);

  auto p1 = pack(*l, out1.path + "/b1");
  REQUIRE(p1);
  CHECK(p1->files == 5);
  CHECK(p1->bytes == fs::file_size(out1.path + "/b1"));
  CHECK(p1->sha256.size() == 64);

  // The same files, touched later: the same bundle.
  ::utimes((src.path + "/train.py").c_str(), nullptr);
  auto p2 = pack(*list_dir(src.path, 1ull << 30), out1.path + "/b2");
  REQUIRE(p2);
  CHECK(p2->sha256 == p1->sha256);
  // One byte changed: another bundle.
  write(src.path + "/train.py", "print('ho')\n");
  auto p3 = pack(*list_dir(src.path, 1ull << 30), out1.path + "/b3");
  REQUIRE(p3);
  CHECK(p3->sha256 != p1->sha256);

  auto n = unpack(out1.path + "/b1", out2.path + "/w");
  REQUIRE(n);
  CHECK(*n == 5);
  CHECK(read(out2.path + "/w/train.py") == "print('hi')\n");
  CHECK(read(out2.path + "/w/alias.py") == "print('hi')\n");
  CHECK(read(out2.path + "/w/data/sub/x.bin") == std::string(3 << 20, '\x07'));
  CHECK(read(out2.path + "/w/empty").empty());
  CHECK(::access((out2.path + "/w/run.sh").c_str(), X_OK) == 0);
  CHECK(::access((out2.path + "/w/train.py").c_str(), X_OK) != 0);
}

TEST_CASE("a listing over the size limit names the limit and the largest files", "[ship]") {
  temp_dir src;
  write(src.path + "/big.bin", std::string(2000, 'x'));
  write(src.path + "/small.txt", "abc");
  auto l = list_dir(src.path, 1000);
  REQUIRE_FALSE(l);
  CHECK(l.error().find("more than the 1000 bytes allowed") != std::string::npos);
  CHECK(l.error().find("big.bin") != std::string::npos);
  auto missing = list_dir(src.path + "/nope", 1000);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("no such file or directory") != std::string::npos);
}

TEST_CASE("a single file ships as itself", "[ship]") {
  temp_dir src, out;
  write(src.path + "/labels.csv", "a,b\n");
  auto l = list_dir(src.path + "/labels.csv", 1 << 20);
  REQUIRE(l);
  CHECK(rels(*l) == std::vector<std::string>{"labels.csv"});
  REQUIRE(pack(*l, out.path + "/b"));
  REQUIRE(unpack(out.path + "/b", out.path + "/u"));
  CHECK(read(out.path + "/u/labels.csv") == "a,b\n");
}

TEST_CASE("corrupt bundles are refused with the reason", "[ship]") {
  temp_dir src, out;
  write(src.path + "/a.txt", "hello");
  auto p = pack(*list_dir(src.path, 1 << 20), out.path + "/good");
  REQUIRE(p);
  auto good = read(out.path + "/good");

  auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    write(out.path + "/bad", bytes);
    auto r = unpack(out.path + "/bad", out.path + "/u");
    REQUIRE_FALSE(r);
    INFO(r.error());
    CHECK(r.error().find(needle) != std::string::npos);
  };
  expect_error("NOTMAGIC" + good.substr(8), "bad magic");
  expect_error(good.substr(0, good.size() - 1), "truncated");
  expect_error(good.substr(0, good.size() - 4), "truncated in a.txt");
  expect_error(good + "x", "bytes after the end record");
  // A record that escapes the destination: "../x".
  std::string evil = good.substr(0, 8);
  evil += 'F';
  evil += '\0';
  evil += std::string("\x04\0\0\0", 4) + "../x" + std::string("\x01\0\0\0\0\0\0\0", 8) + "z" + "E";
  expect_error(evil, "unsafe path '../x'");
  CHECK_FALSE(fs::exists(out.path + "/x"));
  std::string odd = good.substr(0, 8) + "Q";
  expect_error(odd, "unknown record kind");
}

TEST_CASE("a git working directory ships its tree with uncommitted changes", "[ship]") {
  if (std::system("git --version >/dev/null 2>&1") != 0) {
    WARN("git is not installed: the git tree case is not checked");
    return;
  }
  temp_dir repo;
  auto git = [&](const std::string& args) {
    auto cmd = "git -C '" + repo.path + "' -c user.email=t@t -c user.name=t " + args
               + " >/dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
  };
  git("init -q");
  write(repo.path + "/.gitignore", "*.log\nout/\n");
  write(repo.path + "/src/train.py", "v1\n");
  write(repo.path + "/README", "r\n");
  write(repo.path + "/gone.txt", "g\n");
  git("add -A");
  git("commit -q -m init");
  write(repo.path + "/src/train.py", "v2 uncommitted\n"); // modified
  write(repo.path + "/src/new.py", "new\n");              // untracked
  write(repo.path + "/run.log", "ignored\n");             // ignored
  write(repo.path + "/out/model.bin", "ignored\n");       // ignored
  fs::remove(repo.path + "/gone.txt");                    // deleted, not committed

  auto l = list_workdir(repo.path + "/src", 1 << 20);
  REQUIRE(l);
  CHECK(l->how == "git tree");
  CHECK(l->cwd_rel == "src");
  CHECK(rels(*l)
        == std::vector<std::string>{".gitignore", "README", "src/new.py", "src/train.py"});
  temp_dir out;
  REQUIRE(pack(*l, out.path + "/b"));
  REQUIRE(unpack(out.path + "/b", out.path + "/u"));
  CHECK(read(out.path + "/u/src/train.py") == "v2 uncommitted\n");

  // Outside a git tree: the directory itself.
  temp_dir plain;
  write(plain.path + "/x.py", "x\n");
  auto p = list_workdir(plain.path, 1 << 20);
  REQUIRE(p);
  CHECK(p->how == "directory");
  CHECK(p->cwd_rel.empty());
  CHECK(rels(*p) == std::vector<std::string>{"x.py"});
}
