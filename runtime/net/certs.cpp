// SPDX-License-Identifier: Apache-2.0
#include "runtime/net/certs.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <cctype>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace monkey {

namespace {

struct pkey_free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct x509_free {
  void operator()(X509* p) const { X509_free(p); }
};
struct store_free {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
struct store_ctx_free {
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};
struct file_close {
  void operator()(FILE* f) const { std::fclose(f); }
};

using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;
using file_ptr = std::unique_ptr<FILE, file_close>;

std::string ssl_error() {
  auto code = ERR_get_error();
  if (code == 0)
    return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// Reads one PEM object from `path` with `read` (PEM_read_X509, PEM_read_PrivateKey);
/// `problem` names the file and what is wrong when it fails.
template <class Ptr, class Read>
Ptr read_pem(const std::string& path, std::string& problem, Read read, const char* what) {
  file_ptr f{std::fopen(path.c_str(), "r")};
  if (!f) {
    problem = path + ": " + std::strerror(errno);
    return nullptr;
  }
  Ptr p{read(f.get(), nullptr, nullptr, nullptr)};
  if (!p)
    problem = path + " is not " + what + " (" + ssl_error() + ")";
  return p;
}

x509_ptr read_cert(const std::string& path, std::string& problem) {
  return read_pem<x509_ptr>(path, problem, PEM_read_X509, "a PEM certificate");
}

pkey_ptr read_key(const std::string& path, std::string& problem) {
  return read_pem<pkey_ptr>(path, problem, PEM_read_PrivateKey,
                            "a PEM private key without passphrase");
}

/// Writes `path` atomically (a temporary file, fsync, rename) through `write`; `secret`
/// files are created 0600.
template <class Write>
status write_pem(const std::string& path, bool secret, Write write) {
  auto tmp = path + ".tmp";
  ::unlink(tmp.c_str());
  auto old = ::umask(secret ? 077 : 022);
  file_ptr f{std::fopen(tmp.c_str(), "w")};
  ::umask(old);
  if (!f)
    return failure{tmp + ": " + std::strerror(errno)};
  if (write(f.get()) != 1)
    return failure{"cannot write " + path + ": " + ssl_error()};
  if (std::fflush(f.get()) != 0 || ::fsync(fileno(f.get())) != 0)
    return failure{"cannot write " + path + ": " + std::strerror(errno)};
  f.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return failure{"cannot rename " + tmp + ": " + std::strerror(errno)};
  return {};
}

status write_key(const std::string& path, EVP_PKEY* key) {
  return write_pem(path, true, [&](FILE* f) {
    return PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  });
}

status write_cert(const std::string& path, X509* cert) {
  return write_pem(path, false, [&](FILE* f) { return PEM_write_X509(f, cert); });
}

pkey_ptr new_key() {
  // RSA 2048: what every TLS stack (and CAF 0.17's default cipher list) accepts.
  return pkey_ptr{EVP_RSA_gen(2048)};
}

bool add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext)
    return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

/// A certificate for `key` named `cn`, signed by `issuer_key` (self-signed when issuer is null).
expected<x509_ptr> issue(const std::string& cn, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                         long days, bool is_ca) {
  x509_ptr cert{X509_new()};
  if (!cert)
    return failure{ssl_error()};
  X509_set_version(cert.get(), 2);
  // A random 127-bit serial number, as RFC 5280 asks (positive, unique per CA).
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1)
    return failure{"no randomness for a serial number: " + ssl_error()};
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), days * 24L * 3600L);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("Monkey cluster"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  bool ok = true;
  if (is_ca) {
    ok = add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0")
         && add_ext(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign")
         && add_ext(cert.get(), signer, NID_subject_key_identifier, "hash");
  } else {
    ok = add_ext(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE")
         && add_ext(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment")
         && add_ext(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth")
         && add_ext(cert.get(), signer, NID_subject_key_identifier, "hash")
         && add_ext(cert.get(), signer, NID_authority_key_identifier, "keyid");
  }
  if (!ok)
    return failure{"cannot add certificate extensions: " + ssl_error()};
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0)
    return failure{"cannot sign the certificate for " + cn + ": " + ssl_error()};
  return cert;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64 || n == "ca")
    return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return n.front() != '.';
}

} // namespace

tls_files tls_files_in(const std::string& dir, const std::string& name) {
  return {dir + "/" + name + ".pem", dir + "/" + name + ".key", dir + "/ca.pem"};
}

expected<certs_report> make_certs(const certs_options& opt) {
  if (opt.dir.empty())
    return failure{"certs: no folder given"};
  if (opt.days < 1 || opt.days > 36500)
    return failure{"certs: --days must be between 1 and 36500, not " + std::to_string(opt.days)};
  for (auto& n : opt.names)
    if (!valid_name(n))
      return failure{"certs: '" + n
                     + "' is not a certificate name (letters, digits, '-', '_', '.'; not 'ca')"};
  if (::mkdir(opt.dir.c_str(), 0700) != 0 && errno != EEXIST)
    return failure{"certs: cannot create " + opt.dir + ": " + std::strerror(errno)};
  certs_report out;
  auto ca_pem = opt.dir + "/ca.pem";
  auto ca_key_path = opt.dir + "/ca.key";
  pkey_ptr ca_key;
  x509_ptr ca;
  if (exists(ca_pem) && exists(ca_key_path)) {
    std::string problem;
    ca = read_cert(ca_pem, problem);
    if (ca)
      ca_key = read_key(ca_key_path, problem);
    if (!ca || !ca_key)
      return failure{"certs: " + problem};
    if (X509_check_private_key(ca.get(), ca_key.get()) != 1)
      return failure{"certs: " + ca_key_path + " does not belong to " + ca_pem};
  } else if (exists(ca_pem) || exists(ca_key_path)) {
    return failure{"certs: " + opt.dir + " has only one of ca.pem and ca.key; "
                   "restore the other or remove both to start a new CA"};
  } else {
    ca_key = new_key();
    if (!ca_key)
      return failure{"certs: cannot generate the CA key: " + ssl_error()};
    auto c = issue("Monkey cluster CA", ca_key.get(), nullptr, nullptr, 3650, true);
    if (!c)
      return failure{"certs: " + c.error()};
    ca = std::move(*c);
    if (auto bad = write_key(ca_key_path, ca_key.get()); !bad)
      return failure{"certs: " + bad.error()};
    if (auto bad = write_cert(ca_pem, ca.get()); !bad)
      return failure{"certs: " + bad.error()};
    out.created_ca = true;
    out.written.push_back(ca_pem);
    out.written.push_back(ca_key_path);
  }
  for (auto& n : opt.names) {
    auto files = tls_files_in(opt.dir, n);
    if (!opt.force && exists(files.cert) && exists(files.key)) {
      out.kept.push_back(files.cert);
      continue;
    }
    auto key = new_key();
    if (!key)
      return failure{"certs: cannot generate a key for " + n + ": " + ssl_error()};
    auto c = issue(n, key.get(), ca.get(), ca_key.get(), opt.days, false);
    if (!c)
      return failure{"certs: " + c.error()};
    if (auto bad = write_key(files.key, key.get()); !bad)
      return failure{"certs: " + bad.error()};
    if (auto bad = write_cert(files.cert, c->get()); !bad)
      return failure{"certs: " + bad.error()};
    out.written.push_back(files.cert);
    out.written.push_back(files.key);
  }
  return out;
}

status check_tls_files(const tls_files& files) {
  std::string problem;
  auto cert = read_cert(files.cert, problem);
  if (!cert)
    return failure{problem};
  auto key = read_key(files.key, problem);
  if (!key)
    return failure{problem};
  auto ca = read_cert(files.ca, problem);
  if (!ca)
    return failure{problem};
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return failure{files.key + " does not belong to the certificate " + files.cert};
  }
  std::unique_ptr<X509_STORE, store_free> store{X509_STORE_new()};
  std::unique_ptr<X509_STORE_CTX, store_ctx_free> ctx{X509_STORE_CTX_new()};
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1
      || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1)
    return failure{"cannot set up certificate verification: " + ssl_error()};
  if (X509_verify_cert(ctx.get()) != 1) {
    auto err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return failure{files.cert + " does not verify against the CA " + files.ca + ": "
           + X509_verify_cert_error_string(err)};
  }
  return {};
}

std::string certificate_name(const std::string& pem_path) {
  std::string problem;
  auto cert = read_cert(pem_path, problem);
  if (!cert)
    return {};
  char buf[256] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, buf,
                            sizeof(buf) - 1);
  return buf;
}

} // namespace monkey
