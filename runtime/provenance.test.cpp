// SPDX-License-Identifier: Apache-2.0
#include "runtime/provenance.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace monkey;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/monkey-prov-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  return tmpl;
}

void sh(const std::string& cmd) {
  REQUIRE(std::system(("cd " + cmd + " >/dev/null 2>&1").c_str()) == 0);
}

} // namespace

TEST_CASE("a job's provenance: commit, uncommitted changes and their diff", "[provenance]") {
  if (std::system("git --version >/dev/null 2>&1") != 0) {
    WARN("no git on this machine: skipped");
    return;
  }
  auto dir = temp_dir();
  sh(dir + " && git init -q && git config user.email t@t && git config user.name t"
           " && echo one > a.txt && git add a.txt && git commit -qm one");
  auto clean = collect_provenance(dir, {"sh", "-c", "true"});
  CHECK(clean.at("git_commit").size() == 40);
  CHECK(clean.at("git_dirty") == "no");
  CHECK(clean.count("git_diff") == 0);
  CHECK(clean.at("monkey_version").size() >= 5);
  CHECK(clean.count("python") == 0);
  CHECK(provenance_changes(clean, clean).empty());

  std::ofstream(dir + "/a.txt") << "two\n";
  auto dirty = collect_provenance(dir, {});
  CHECK(dirty.at("git_dirty") == "yes");
  CHECK(dirty.at("git_diff").find("+two") != std::string::npos);
  CHECK(dirty.at("git_diff_sha256") == sha256_hex(dirty.at("git_diff")));
  auto changes = provenance_changes(clean, dirty);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0] == "code: the working directory has uncommitted changes it did not have");
  CHECK(provenance_changes(dirty, clean).at(0).find("uncommitted changes that are gone") != std::string::npos);

  std::ofstream(dir + "/a.txt") << "three\n";
  auto other = collect_provenance(dir, {});
  CHECK(provenance_changes(dirty, other).at(0).find("code: the uncommitted changes differ") == 0);

  sh(dir + " && git commit -qam three");
  auto moved = collect_provenance(dir, {});
  auto c = provenance_changes(clean, moved);
  REQUIRE_FALSE(c.empty());
  CHECK(c[0].find("code changed: it ran at commit " + clean.at("git_commit").substr(0, 12)) == 0);

  auto gone = collect_provenance("/", {});
  CHECK(provenance_changes(clean, gone).at(0).find("no longer a git tree") != std::string::npos);
  auto v = clean;
  v["monkey_version"] = "0.0.1";
  CHECK(provenance_changes(v, clean).at(0).find("monkey version: 0.0.1 then") == 0);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("sha256 of known inputs", "[provenance]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
