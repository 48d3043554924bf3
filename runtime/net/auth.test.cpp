// SPDX-License-Identifier: Apache-2.0
#include "runtime/net/auth.hpp"

#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("HMAC-SHA256 matches the RFC 4231 test vector", "[runtime][auth]") {
  std::string key(20, '\x0b');
  auto mac = hmac_sha256(key, "Hi There");
  static const char hex[] = "0123456789abcdef";
  std::string text;
  for (unsigned char c : mac) {
    text += hex[c >> 4];
    text += hex[c & 15];
  }
  CHECK(text == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
}

TEST_CASE("proofs depend on the secret and both nonces", "[runtime][auth]") {
  auto sn = make_nonce(), cn = make_nonce();
  auto p = client_proof("secret-one-0123456", sn, cn, "alice");
  CHECK(equal_digest(p, client_proof("secret-one-0123456", sn, cn, "alice")));
  CHECK_FALSE(equal_digest(p, client_proof("secret-two-0123456", sn, cn, "alice")));
  CHECK_FALSE(equal_digest(p, client_proof("secret-one-0123456", make_nonce(), cn, "alice")));
  CHECK_FALSE(equal_digest(p, server_proof("secret-one-0123456", sn, cn)));
  CHECK(make_nonce() != make_nonce());
}

TEST_CASE("the secret file is created 0600 and refused when others can read it",
          "[runtime][auth]") {
  char tmpl[] = "/tmp/monkey-auth-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto path = dir + "/secret";
  CHECK_FALSE(load_secret(path, false));
  auto created = load_secret(path, true);
  REQUIRE(created);
  CHECK(created->size() == 64);
  struct stat st {};
  ::stat(path.c_str(), &st);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(*load_secret(path, false) == *created);
  ::chmod(path.c_str(), 0644);
  auto refused = load_secret(path, false);
  REQUIRE_FALSE(refused);
  CHECK_THAT(refused.error(), Catch::Contains("chmod 600"));
}
