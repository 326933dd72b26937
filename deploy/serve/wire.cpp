#include "deploy/serve/wire.h"

#include <grpc/support/log.h>

#include "core/error.h"

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

EncodedTensor from_proto(const proto::Tensor& t) {
  EncodedTensor e;
  e.shape.assign(t.shape().begin(), t.shape().end());
  e.precision = from_proto(t.precision());
  e.sparse = t.sparse();
  e.difference = t.difference();
  e.payload = t.payload();
  return e;
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

std::shared_ptr<grpc::Channel> open_channel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a worker restarts rather than backing off for minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

std::chrono::system_clock::time_point deadline_in(double ms) {
  return std::chrono::system_clock::now() +
         std::chrono::microseconds(static_cast<int64_t>(ms * 1000.0));
}

namespace {
void drop_log(gpr_log_func_args*) {}
}  // namespace

void silence_grpc_log() { gpr_set_log_function(drop_log); }

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
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
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
