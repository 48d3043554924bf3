// SPDX-License-Identifier: Apache-2.0
#pragma once
// TLS material for a cluster (`monkey certs`, `--tls`): a private certificate authority,
// and certificates it signs for nodes and clients. Plain OpenSSL, no CAF.
//
// A certificate folder holds ca.pem (the CA certificate every member trusts), ca.key (only
// needed where new certificates are issued), and NAME.pem / NAME.key pairs. A node uses
// node.pem/node.key by default, clients client.pem/client.key. Keys are written 0600.

#include <string>
#include <vector>

#include "runtime/expected.hpp"

namespace monkey {

/// The three files one process presents and trusts.
struct tls_files {
  std::string cert; ///< PEM certificate, signed by the CA
  std::string key;  ///< PEM private key matching `cert`
  std::string ca;   ///< PEM CA certificate that signs every member's certificate
  bool enabled() const { return !cert.empty(); }
};

/// DIR/NAME.pem, DIR/NAME.key and DIR/ca.pem.
tls_files tls_files_in(const std::string& dir, const std::string& name);

struct certs_options {
  std::string dir;                 ///< created if missing (0700)
  std::vector<std::string> names;  ///< certificates to issue, e.g. {"node", "client"}
  int days = 825;                  ///< validity of issued certificates (CA: 10 years)
  bool force = false;              ///< reissue certificates that already exist
};

/// What `make_certs` wrote (paths), for the CLI to print.
struct certs_report {
  bool created_ca = false;
  std::vector<std::string> written;
  std::vector<std::string> kept; ///< existed already, left alone (without force)
};

/// Creates the CA in `dir` unless ca.pem and ca.key exist there, then issues one
/// certificate per name (common name = the name, signed by the CA, client and server use).
expected<certs_report> make_certs(const certs_options& opt);

/// Checks that the files exist and parse, that the key matches the certificate, that the
/// CA signed the certificate and that it has not expired. "" when fine, else a sentence
/// naming the file and the problem.
status check_tls_files(const tls_files& files);

/// Subject common name of a PEM certificate file ("" when unreadable).
std::string certificate_name(const std::string& pem_path);

} // namespace monkey
