// What igb-serve's programs share about the wire: tensors in and out of the protocol's messages,
// gRPC's answers said in our words, channels and servers set up alike. Included only by the
// sources of deploy/serve (the generated protocol headers stay out of every other header).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "deploy/serve/serve.grpc.pb.h"
#include "deploy/serve/tensor_codec.h"

namespace igb::deploy {

/// The generated messages and services of deploy/serve/serve.proto.
namespace proto = ::igb::serve::proto;

/// The largest message a worker or master accepts: a frame's tensors at 2^28 values (the
/// decoder's limit) in float32 would be 1 GiB; messages of a model's activations are far under.
constexpr int kMaxMessageBytes = 1 << 30;

proto::Precision to_proto(TransferPrecision p);
TransferPrecision from_proto(proto::Precision p);

/// An encoded tensor into / out of its message form (no check: decode_tensor checks).
void to_proto(const EncodedTensor& e, const std::string& name, proto::Tensor* out);
/// The same, taking the payload over instead of copying it.
void to_proto(EncodedTensor&& e, const std::string& name, proto::Tensor* out);
EncodedTensor from_proto(const proto::Tensor& t);

/// Times `messages` probes (ProbeRequest) of each size in `values` sent through `call`, each from
/// its encoding (in `precision`; with `diff` as its difference from the one before) to the
/// receiver's answer, after two unmeasured ones: the median ms of a message per size. Throws
/// std::runtime_error with `call`'s failure in our words when one fails.
std::vector<double> time_probes(
    const std::function<grpc::Status(const proto::Frame&, std::string* error)>& call, int messages,
    const std::vector<int64_t>& values, TransferPrecision precision = TransferPrecision::kFp32,
    bool diff = false);
/// The receiving end of a probe: decodes its tensors (as a frame's are; a difference is added to
/// a tensor and the sum copied, as a stage's input is) and drops them.
grpc::Status absorb_probe(const proto::Frame& frame);

/// A failed call to `who` in our words: "not reachable (nothing listens there, or it died)",
/// "did not answer within 2000 ms", or the message our own server put in the status.
std::string status_text(const grpc::Status& status, const std::string& who, double timeout_ms);

/// status_text of a failed call on `channel`, telling a peer never connected to (nothing listens,
/// or the connection was refused: a TLS handshake failed) from one that connected and did not
/// answer: calls wait for a connection, so both end at the deadline.
std::string call_failure(const grpc::Status& status, grpc::Channel& channel, const std::string& who,
                         double timeout_ms);

/// A channel to `address` with igb-serve's message limits, secured as set_transport_security
/// says (transport_security.h).
std::shared_ptr<grpc::Channel> open_channel(const std::string& address);

/// A deadline `ms` from now (a context's set_deadline).
std::chrono::system_clock::time_point deadline_in(double ms);

/// Keeps gRPC's own log lines out of the output (errors reach the user as our messages).
void silence_grpc_log();

/// Starts a server listening on `address` ("host:port"; port 0 picks a free one) with `service`;
/// the bound address is written to `bound`. InputError naming `option` when it cannot listen.
std::unique_ptr<grpc::Server> start_server(const std::string& address, grpc::Service* service,
                                           const std::string& option, std::string* bound);

}  // namespace igb::deploy
