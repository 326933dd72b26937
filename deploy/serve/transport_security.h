// How igb-serve's processes authenticate each other (docs/serving.md#security): mutual TLS with
// certificates signed by one CA, or plaintext on loopback (beyond it only when asked).
#pragma once

#include <string>

namespace igb::deploy {

/// PEM files of this process's certificate, its private key and the CA that signs every peer's
/// certificate (--tls-cert, --tls-key, --tls-ca). All empty: plaintext.
struct TlsFiles {
  std::string cert, key, ca;
  bool enabled() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

/// Sets how every channel this process opens and every server it starts from now on secures its
/// connections: with `files`, mutual TLS (a server asks each client for a certificate signed by
/// the CA and refuses one without; a client checks the server's the same way, and the server's
/// certificate must name the host it is reached at in its subjectAltName); without, plaintext,
/// and a server may then listen beyond loopback only with `insecure`. InputError naming the
/// option when a file is missing, unreadable or not PEM, or when only some of the three are given.
void set_transport_security(const TlsFiles& files, bool insecure);

/// Whether this process's connections use TLS.
bool transport_secure();

/// Whether the host of `address` ("HOST:PORT") is this machine's loopback: 127.x.x.x, ::1 or
/// localhost.
bool is_loopback(const std::string& address);

}  // namespace igb::deploy
