#include "deploy/serve/wire.h"

#include <grpc/support/log.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iostream>
#include <mutex>

#include "core/error.h"
#include "core/fs.h"
#include "deploy/serve/transport_security.h"

namespace igb::deploy {

proto::Precision to_proto(TransferPrecision p) {
  switch (p) {
    case TransferPrecision::kFp16:
      return proto::FP16;
    case TransferPrecision::kInt8:
      return proto::INT8;
    default:
      return proto::FP32;
  }
}

TransferPrecision from_proto(proto::Precision p) {
  switch (p) {
    case proto::FP16:
      return TransferPrecision::kFp16;
    case proto::INT8:
      return TransferPrecision::kInt8;
    default:
      return TransferPrecision::kFp32;
  }
}

void to_proto(const EncodedTensor& e, const std::string& name, proto::Tensor* out) {
  out->set_name(name);
  for (auto d : e.shape) out->add_shape(d);
  out->set_precision(to_proto(e.precision));
  out->set_sparse(e.sparse);
  out->set_difference(e.difference);
  out->set_payload(e.payload);
}

void to_proto(EncodedTensor&& e, const std::string& name, proto::Tensor* out) {
  std::string payload = std::move(e.payload);
  e.payload.clear();
  to_proto(e, name, out);
  out->set_payload(std::move(payload));
}

EncodedTensor from_proto(const proto::Tensor& t) {
  EncodedTensor e;
  e.shape.assign(t.shape().begin(), t.shape().end());
  e.precision = from_proto(t.precision());
  e.sparse = t.sparse();
  e.difference = t.difference();
  e.payload = t.payload();
  return e;
}

std::vector<double> time_probes(
    const std::function<grpc::Status(const proto::Frame&, std::string* error)>& call, int messages,
    const std::vector<int64_t>& values, TransferPrecision precision, bool diff) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> out;
  for (int64_t n : values) {
    // Two tensors in turn: every difference is dense, as activations' are from frame to frame.
    const at::Tensor t[2] = {at::rand({n}), at::rand({n})};
    DiffEncoder encoder(precision);
    std::vector<double> ms;
    for (int i = 0; i < messages + 2; ++i) {
      const auto start = Clock::now();
      proto::Frame f;
      f.set_id(static_cast<uint64_t>(i));
      to_proto(diff ? encoder.encode(t[i % 2]) : encode_tensor(t[i % 2], precision), "probe",
               f.add_tensors());
      std::string error;
      if (!call(f, &error).ok()) throw std::runtime_error(error);
      if (i >= 2)
        ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
    out.push_back(ms.empty() ? 0 : ms[ms.size() / 2]);
  }
  return out;
}

grpc::Status absorb_probe(const proto::Frame& frame) {
  try {
    for (const auto& t : frame.tensors()) {
      const EncodedTensor e = from_proto(t);
      const at::Tensor x = decode_tensor(e, "probe '" + t.name() + "'");
      if (e.difference) (void)(x + x).clone();
    }
  } catch (const InputError& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  }
  return grpc::Status::OK;
}

std::string status_text(const grpc::Status& status, const std::string& who, double timeout_ms) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return who + " is not reachable (nothing listens there, or it died)";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return who + " did not answer within " + std::to_string(static_cast<int64_t>(timeout_ms)) +
             " ms (hung, stopped or overloaded)";
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      // Our own servers' words (a worker refusing a frame or a plan).
      return who + " refused: " + status.error_message();
    case grpc::StatusCode::UNIMPLEMENTED:
      return who + " is not an igb-serve worker of this version";
    case grpc::StatusCode::CANCELLED:
      return who + ": the call was cancelled (the worker is shutting down)";
    default:
      return who + " failed (gRPC status " + std::to_string(status.error_code()) + ")";
  }
}

std::string call_failure(const grpc::Status& status, grpc::Channel& channel, const std::string& who,
                         double timeout_ms) {
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
      channel.GetState(false) == GRPC_CHANNEL_READY)
    return status_text(status, who, timeout_ms);
  return who + " could not be connected to within " +
         std::to_string(static_cast<int64_t>(timeout_ms)) +
         " ms: nothing listens there, or it refused the connection (" +
         (transport_secure() ? "its certificate and this one must be signed by the same --tls-ca"
                             : "it may require TLS: give --tls-cert, --tls-key and --tls-ca") +
         ")";
}

namespace {

/// The process's transport security (set_transport_security), read once when it is set.
struct Security {
  bool tls = false, insecure = false;
  std::string cert, key, ca;
};
std::mutex security_mutex;
Security security;

Security current_security() {
  std::lock_guard<std::mutex> lock(security_mutex);
  return security;
}

/// The PEM text of `path`, given as `option`: InputError when it cannot be read or holds no
/// `what` ("CERTIFICATE", "PRIVATE KEY").
std::string read_pem(const std::string& path, const std::string& option, const std::string& what) {
  if (path.empty())
    throw InputError(option + " is missing: mutual TLS needs --tls-cert, --tls-key and --tls-ca");
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const std::exception&) {
    throw InputError(option + " " + path + ": cannot read the file");
  }
  if (text.find("-----BEGIN ") == std::string::npos ||
      text.find(what + "-----") == std::string::npos)
    throw InputError(option + " " + path + ": not a PEM file holding a " + what);
  return text;
}

}  // namespace

void set_transport_security(const TlsFiles& files, bool insecure) {
  Security s;
  s.insecure = insecure;
  if (files.enabled()) {
    s.tls = true;
    s.cert = read_pem(files.cert, "--tls-cert", "CERTIFICATE");
    s.key = read_pem(files.key, "--tls-key", "PRIVATE KEY");
    s.ca = read_pem(files.ca, "--tls-ca", "CERTIFICATE");
  }
  std::lock_guard<std::mutex> lock(security_mutex);
  security = s;
}

bool transport_secure() { return current_security().tls; }

bool is_loopback(const std::string& address) {
  const auto colon = address.rfind(':');
  std::string host = colon == std::string::npos ? address : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::shared_ptr<grpc::Channel> open_channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a worker restarts rather than backing off for minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  const auto s = current_security();
  if (!s.tls) return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = s.ca;
  ssl.pem_private_key = s.key;
  ssl.pem_cert_chain = s.cert;
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
}

std::chrono::system_clock::time_point deadline_in(double ms) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(ms * 1000.0));
}

namespace {

/// gRPC's log, kept out of the output except for a refused TLS handshake: one line per peer
/// refused (the server's side of an unauthenticated connection), at most one a second.
void filter_log(gpr_log_func_args* args) {
  if (!args->message || !std::strstr(args->message, "Handshake failed")) return;
  static std::atomic<int64_t> last{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (last.exchange(now) == now) return;
  const char* reason = std::strstr(args->message, "error:");
  std::cerr << "igb-serve: refused a connection: TLS handshake failed ("
            << (reason ? std::string(reason) : std::string(args->message))
            << "): a peer needs TLS and a certificate signed by the same --tls-ca" << std::endl;
}

}  // namespace

void silence_grpc_log() { gpr_set_log_function(filter_log); }

std::unique_ptr<grpc::Server> start_server(const std::string& address, grpc::Service* service,
                                           const std::string& option, std::string* bound) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size())
    throw InputError(option + " " + address + ": give HOST:PORT (port 0 picks a free one)");
  for (size_t i = colon + 1; i < address.size(); ++i)
    if (address[i] < '0' || address[i] > '9')
      throw InputError(option + " " + address + ": the port must be a number");
  // gRPC would take the port modulo 65536 and listen on another one.
  if (address.size() - colon - 1 > 5 || std::stol(address.substr(colon + 1)) > 65535)
    throw InputError(option + " " + address + ": the port must be from 0 to 65535");
  const auto s = current_security();
  if (!s.tls && !s.insecure && !is_loopback(address))
    throw InputError(option + " " + address +
                     ": listening beyond this machine needs mutual TLS (--tls-cert, --tls-key, "
                     "--tls-ca) or, to let anyone on the network control it, --insecure");
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (s.tls) {
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    ssl.pem_root_certs = s.ca;
    ssl.pem_key_cert_pairs.push_back({s.key, s.cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  builder.RegisterService(service);
  auto server = builder.BuildAndStart();
  if (!server || port == 0)
    throw InputError(option + " " + address +
                     ": cannot listen there (the port is in use, or the host is not this "
                     "machine's)");
  *bound = address.substr(0, colon) + ":" + std::to_string(port);
  return server;
}

}  // namespace igb::deploy
