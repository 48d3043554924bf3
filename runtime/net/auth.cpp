// SPDX-License-Identifier: Apache-2.0
#include "runtime/net/auth.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "runtime/ids.hpp"

namespace monkey {

expected<std::string> load_secret(const std::string& path, bool create) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && create) {
    unsigned char raw[32];
    random_bytes(raw, sizeof(raw));
    static const char hex[] = "0123456789abcdef";
    std::string text;
    for (auto b : raw) {
      text += hex[b >> 4];
      text += hex[b & 15];
    }
    text += '\n';
    int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out >= 0) {
      bool ok = ::write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ok = ::fsync(out) == 0 && ok;
      ::close(out);
      if (!ok)
        return failure{"cannot write the cluster secret file " + path};
    } else if (errno != EEXIST) {
      return failure{"cannot create the cluster secret file " + path + ": "
                     + std::strerror(errno)};
    }
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0)
    return failure{"cannot read the cluster secret file " + path + ": " + std::strerror(errno)
                   + " (give --secret-file or set MONKEY_SECRET_FILE)"};
  struct stat st {};
  ::fstat(fd, &st);
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return failure{"the cluster secret file " + path
                   + " is readable by others; run: chmod 600 " + path};
  }
  char buf[4096];
  auto n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (n <= 0)
    return failure{"the cluster secret file " + path + " is empty"};
  std::string secret(buf, static_cast<size_t>(n));
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' '))
    secret.pop_back();
  if (secret.size() < 16)
    return failure{"the cluster secret in " + path + " is shorter than 16 characters"};
  return secret;
}

std::string hmac_sha256(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string make_nonce() {
  std::string n(32, '\0');
  random_bytes(n.data(), n.size());
  return n;
}

std::string client_proof(const std::string& secret, const std::string& server_nonce,
                         const std::string& client_nonce, const std::string& user) {
  return hmac_sha256(secret, "monkey-client-v1\n" + server_nonce + client_nonce + user);
}

std::string server_proof(const std::string& secret, const std::string& server_nonce,
                         const std::string& client_nonce) {
  return hmac_sha256(secret, "monkey-server-v1\n" + client_nonce + server_nonce);
}

bool equal_digest(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

const char* to_string(role r) {
  switch (r) {
    case role::client: return "client";
    case role::node: return "node";
    case role::app: return "app";
  }
  return "unknown";
}

std::optional<role> parse_role(const std::string& text) {
  if (text == "client" || text.empty())
    return role::client;
  if (text == "node")
    return role::node;
  if (text == "app")
    return role::app;
  return std::nullopt;
}

std::string node_key(const std::string& secret) {
  return hmac_sha256(secret, "monkey-node-key-v1");
}

std::string client_token(const std::string& secret) {
  return to_hex(hmac_sha256(secret, "monkey-client-token-v1"));
}

std::string attempt_key(const std::string& node_key, const std::string& attempt_id) {
  return to_hex(hmac_sha256(node_key, "monkey-attempt-key-v1\n" + attempt_id));
}

expected<std::string> load_token(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return failure{"cannot read the client token file " + path + ": " + std::strerror(errno)};
  struct stat st {};
  ::fstat(fd, &st);
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return failure{"the client token file " + path + " is readable by others; run: chmod 600 "
                   + path};
  }
  char buf[256];
  auto n = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  std::string token(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' '))
    token.pop_back();
  if (token.size() != 64 || token.find_first_not_of("0123456789abcdef") != std::string::npos)
    return failure{"the client token file " + path + " does not hold a token (64 hex digits)"};
  return token;
}

status write_token_file(const std::string& path, const std::string& token) {
  int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (out < 0)
    return errno == EEXIST ? status{}
                           : failure{"cannot create the client token file " + path + ": "
                                     + std::strerror(errno)};
  auto text = token + "\n";
  bool ok = ::write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::fsync(out) == 0 && ok;
  ::close(out);
  return ok ? status{} : failure{"cannot write the client token file " + path};
}

} // namespace monkey
