// SPDX-License-Identifier: Apache-2.0
#include "runtime/net/certs.hpp"

#include <cstdlib>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/monkey-certs-XXXXXX";
  return ::mkdtemp(tmpl);
}

void remove_dir(const std::string& dir) {
  std::system(("rm -rf '" + dir + "'").c_str());
}

} // namespace

TEST_CASE("certs: a CA and certificates that verify against it", "[runtime][certs]") {
  auto dir = temp_dir() + "/certs";
  auto made = make_certs({dir, {"node", "client"}, 30, false});
  REQUIRE(made);
  CHECK(made->created_ca);
  CHECK(made->written.size() == 6);
  CHECK(check_tls_files(tls_files_in(dir, "node")));
  CHECK(check_tls_files(tls_files_in(dir, "client")));
  CHECK(certificate_name(dir + "/node.pem") == "node");
  struct stat st;
  REQUIRE(::stat((dir + "/node.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0); // private keys are not readable by others
  REQUIRE(::stat((dir + "/ca.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);

  SECTION("a second run keeps the CA and existing certificates, issues new names") {
    auto again = make_certs({dir, {"node", "worker-7"}, 30, false});
    REQUIRE(again);
    CHECK_FALSE(again->created_ca);
    CHECK(again->kept.size() == 1);
    CHECK(check_tls_files(tls_files_in(dir, "worker-7")));
  }
  SECTION("a certificate from another CA does not verify") {
    auto other = dir + "-other";
    REQUIRE(make_certs({other, {"node"}, 30, false}));
    auto mixed = tls_files_in(other, "node");
    mixed.ca = dir + "/ca.pem";
    auto problem = check_tls_files(mixed).error();
    CHECK(problem.find("does not verify against the CA") != std::string::npos);
    remove_dir(other);
  }
  SECTION("a key from another pair is named") {
    auto files = tls_files_in(dir, "node");
    files.key = dir + "/client.key";
    CHECK(check_tls_files(files).error().find("does not belong") != std::string::npos);
  }
  SECTION("a corrupt certificate is named") {
    std::ofstream(dir + "/bad.pem") << "-----BEGIN CERTIFICATE-----\nnot base64\n";
    auto files = tls_files_in(dir, "node");
    files.cert = dir + "/bad.pem";
    CHECK(check_tls_files(files).error().find("bad.pem is not a PEM certificate") != std::string::npos);
    files = tls_files_in(dir, "missing");
    CHECK(check_tls_files(files).error().find("missing.pem") != std::string::npos);
  }
  remove_dir(dir.substr(0, dir.rfind('/')));
}

TEST_CASE("certs: bad names and a half CA are refused", "[runtime][certs]") {
  auto dir = temp_dir();
  CHECK(make_certs({dir, {"../x"}, 30, false}).error().find("not a certificate name")
        != std::string::npos);
  CHECK(make_certs({dir, {"ca"}, 30, false}).error().find("not a certificate name")
        != std::string::npos);
  CHECK(make_certs({dir, {"n"}, 0, false}).error().find("--days") != std::string::npos);
  std::ofstream(dir + "/ca.pem") << "x";
  CHECK(make_certs({dir, {"n"}, 30, false}).error().find("only one of ca.pem and ca.key")
        != std::string::npos);
  remove_dir(dir);
}
