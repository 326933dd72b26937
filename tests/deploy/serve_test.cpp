// igb-serve with real processes on loopback: a partitioned chain of three workers equals the
// model's forward pass (whole tensors and frame differences), a killed or stopped worker ends the
// master with a clear error within its timeout, and malformed frames are refused while the worker
// goes on serving.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/subprocess.h"
#include "data/image.h"
#include "data/opencv_samples.h"
#include "deploy/early_exit/exit_export.h"
#include "deploy/early_exit/exit_network.h"
#include "deploy/partition/graph_problem.h"
#include "deploy/partition/partition_solver.h"
#include "deploy/partition/plan_file.h"
#include "deploy/partition/stages.h"
#include "deploy/serve/link_sender.h"
#include "deploy/serve/serve_master.h"
#include "deploy/serve/serve_worker.h"
#include "deploy/serve/served_chain.h"
#include "deploy/serve/transport_security.h"
#include "deploy/serve/wire.h"
#include "models/model.h"
#include "tests/apps/run_support.h"
#include "tests/deploy/net_lab.h"
#include "tests/support.h"

namespace igb::deploy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// A zoo model as igb-serve's workers hold it (seed-0 weights), its forward pass and its graph
/// at side × side.
struct ZooModel {
  models::Model model;
  graph::SummaryGraph::Forward forward;
  graph::SummaryGraph graph;
};

ZooModel zoo_model(const std::string& name, int64_t side) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto model = models::create_model(name, {});
  model->eval();
  graph::SummaryGraph::Forward forward = [model](const torch::Tensor& x) {
    return model->forward(x);
  };
  auto graph = graph::SummaryGraph::build(*model, {1, 3, side, side}, forward, name);
  return {model, forward, std::move(graph)};
}

/// Three stages of resnet20_cifar by position: the stem and layer1, layer2, layer3 and the head.
std::vector<Stage> resnet20_stages(const graph::SummaryGraph& graph) {
  Assignment a(graph.ops().size(), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string& name = graph.op(static_cast<int>(i)).name;
    if (name.rfind("layer2", 0) == 0) a[i] = 1;
    if (name.rfind("layer3", 0) == 0 || name.rfind("fc", 0) == 0 || name == "avgpool" ||
        name.rfind("flatten", 0) == 0)
      a[i] = 2;
  }
  // Ops after the last layer3 op (pooling, flatten, fc) go to the last stage too.
  bool tail = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 2) tail = true;
    if (tail) a[i] = 2;
  }
  return split_stages(graph, a, {"a", "b", "c"});
}

/// Three workers of resnet20_cifar (seed-0 weights, as igb-serve gives a zoo model) on free
/// loopback ports, stopped with the fixture.
class ServeChain : public ::testing::Test {
 protected:
  /// Arguments every worker gets besides its address and model.
  virtual std::vector<std::string> worker_args() { return {}; }

  void SetUp() override {
    for (int i = 0; i < 3; ++i) {
      const auto port = free_local_port();
      addresses_.push_back("127.0.0.1:" + std::to_string(port));
      std::vector<std::string> argv = {std::string(IGB_BIN_DIR) + "/igb-serve",
                                       "worker",
                                       "--listen",
                                       addresses_.back(),
                                       "--model",
                                       "resnet20_cifar",
                                       "--threads",
                                       "1"};
      for (const auto& a : worker_args()) argv.push_back(a);
      pids_.push_back(start_process(argv, dir_ / ("worker" + std::to_string(i) + ".log")));
    }
    // Each test times what the chain does, not the workers' start (slow on a loaded machine).
    for (const auto& a : addresses_) worker_report(a, 60000);
    torch::manual_seed(0);
    models::register_builtin_models();
    model_ = models::create_model("resnet20_cifar", {});
    model_->eval();
    auto m = model_;
    graph_ = std::make_unique<graph::SummaryGraph>(graph::SummaryGraph::build(
        *m, {1, 3, 32, 32}, [m](const torch::Tensor& x) { return m->forward(x); },
        "resnet20_cifar"));
    stages_ = resnet20_stages(*graph_);
    ASSERT_EQ(stages_.size(), 3u);
    torch::manual_seed(1);
    auto base = torch::rand({1, 3, 32, 32});
    for (int i = 0; i < 6; ++i) {
      auto f = base.clone();
      f.index_put_({0, torch::indexing::Slice(), torch::indexing::Slice(i * 4, i * 4 + 6),
                    torch::indexing::Slice(4, 12)},
                   0.9);
      frames_.push_back(f);
    }
  }

  void TearDown() override {
    for (pid_t p : pids_) {
      ::kill(p, SIGCONT);
      ::kill(p, SIGKILL);
      wait_process(p);
    }
  }

  MasterOptions options(bool diff, double timeout_ms = 20000) const {
    MasterOptions o;
    o.workers = addresses_;
    o.diff = diff;
    o.timeout_ms = timeout_ms;
    o.weights = weights_digest(*model_);
    return o;
  }

  /// The largest difference from the model's eager forward pass over the frames, as a fraction
  /// of the output's largest magnitude.
  double max_difference(const ServeResult& r) {
    torch::NoGradGuard no_grad;
    double worst = 0;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const auto ref = model_->forward(frames_[i]);
      EXPECT_EQ(r.outputs[i].size(), 1u);
      EXPECT_EQ(r.outputs[i][0].sizes(), ref.sizes());
      worst = std::max(worst, (r.outputs[i][0] - ref).abs().max().item<double>() /
                                  ref.abs().max().item<double>());
    }
    return worst;
  }

  test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
  std::vector<std::string> addresses_;
  std::vector<pid_t> pids_;
  models::Model model_;
  std::unique_ptr<graph::SummaryGraph> graph_;
  std::vector<Stage> stages_;
  std::vector<at::Tensor> frames_;
};

TEST_F(ServeChain, ThreeWorkersGiveTheModelsOutputInFullAndDiffMode) {
  {
    ServeMaster master(*graph_, options(false));
    master.configure(stages_, 1);
    const auto r = master.serve(frames_);
    // The stages run in their inference forms (BatchNorm folded, oneDNN kernels): the model's
    // output within float rounding.
    EXPECT_LE(max_difference(r), 1e-5);
    // Link 1 carries layer1's output (16x32x32 float32) whole on every frame.
    EXPECT_EQ(r.link_bytes_first[1], 16 * 32 * 32 * 4);
    EXPECT_EQ(r.link_bytes_later[1], 5 * 16 * 32 * 32 * 4);
    EXPECT_EQ(r.link_bytes_first[0], 3 * 32 * 32 * 4);
  }
  {
    // A new plan number: the workers start their difference streams afresh.
    ServeMaster master(*graph_, options(true));
    master.configure(stages_, 2);
    const auto r = master.serve(frames_);
    // Each received tensor is the previous one plus a difference: one float32 rounding per add,
    // carried through the network (docs/serving.md#modes).
    EXPECT_LE(max_difference(r), 1e-5);
    // The frames differ in a 6x8 patch: the input's differences are sent sparse.
    EXPECT_LT(r.link_bytes_later[0], 5 * 3 * 32 * 32 * 4 / 4);
  }
}

TEST_F(ServeChain, AKilledWorkerEndsTheMasterWithAClearError) {
  ServeMaster master(*graph_, options(false, 3000));
  master.configure(stages_, 1);
  ::kill(pids_[2], SIGKILL);
  wait_process(pids_[2]);
  const auto start = std::chrono::steady_clock::now();
  try {
    master.serve(frames_);
    FAIL() << "the chain served without its last worker";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("worker " + addresses_[1] + " could not pass frame"), std::string::npos)
        << what;
    EXPECT_NE(what.find(addresses_[2] + ") is not reachable"), std::string::npos) << what;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST_F(ServeChain, AStoppedWorkerEndsTheMasterWithinTheTimeout) {
  ServeMaster master(*graph_, options(false, 2000));
  master.configure(stages_, 1);
  ::kill(pids_[1], SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  try {
    master.serve(frames_);
    FAIL() << "the chain served through a stopped worker";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("frame 0 is waiting: worker " + addresses_[1] +
                        " (stage 1) did not answer within 500 ms"),
              std::string::npos)
        << what;
  }
  // Reports are asked every quarter of the timeout and may take as long: the stopped worker is
  // named in about half the timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(2000));
}

TEST_F(ServeChain, MalformedFramesAreRefusedAndTheWorkerGoesOn) {
  ServeMaster master(*graph_, options(false));
  master.configure(stages_, 7);
  auto stub = proto::Worker::NewStub(open_channel(addresses_[0]));
  auto deliver = [&](const proto::Frame& f) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(5000));
    proto::Ack ack;
    return stub->Deliver(&ctx, f, &ack);
  };
  auto frame = [&](const at::Tensor& x, const std::string& name, uint32_t plan) {
    proto::Frame f;
    f.set_id(99);
    f.set_plan(plan);
    f.set_reply_to("127.0.0.1:1");
    to_proto(encode_tensor(x, TransferPrecision::kFp32), name, f.add_tensors());
    return f;
  };
  const auto x = torch::rand({1, 3, 32, 32});
  auto s = deliver(frame(torch::rand({1, 3, 20, 20}), "input", 7));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "frame 99 tensor 'input' is 1x3x20x20; stage 0 takes 1x3x32x32");
  s = deliver(frame(x, "layer9", 7));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "frame 99: tensor 'layer9' is not an input of stage 0 (it takes "
            "'input')");
  s = deliver(frame(x, "input", 3));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("frame 99 is for plan 3; worker " + addresses_[0] +
                                   " runs stage 0 of plan 7"),
            std::string::npos);
  auto truncated = frame(x, "input", 7);
  truncated.mutable_tensors(0)->mutable_payload()->resize(100);
  s = deliver(truncated);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("frame 99 tensor 'input'"), std::string::npos)
      << s.error_message();
  auto bad_dtype = frame(x, "input", 7);
  bad_dtype.mutable_tensors(0)->set_precision(static_cast<proto::Precision>(9));
  s = deliver(bad_dtype);
  EXPECT_EQ(s.error_message(), "frame 99: tensor 'input' has precision 9 (0 fp32, 1 fp16, 2 int8)");
  auto int8_as_fp32 = frame(x, "input", 7);
  int8_as_fp32.mutable_tensors(0)->set_precision(proto::INT8);
  s = deliver(int8_as_fp32);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  auto twice = frame(x, "input", 7);
  *twice.add_tensors() = twice.tensors(0);
  s = deliver(twice);
  EXPECT_EQ(s.error_message(), "frame 99: tensor 'input' is sent twice");
  auto no_input = frame(x, "input", 7);
  no_input.clear_tensors();
  s = deliver(no_input);
  EXPECT_EQ(s.error_message(), "frame 99 lacks input 'input'");
  // A probe larger than the master's own is refused, as is one from the last worker to no one.
  auto probe = [&](const std::string& address, int64_t values) {
    proto::ProbeRequest req;
    req.set_messages(1);
    req.add_values(values);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(5000));
    proto::ProbeReply reply;
    return proto::Worker::NewStub(open_channel(address))->Probe(&ctx, req, &reply);
  };
  s = probe(addresses_[0], int64_t{1} << 20);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "a probe's tensor holds 1 to 262144 values");
  s = probe(addresses_[2], 1);
  EXPECT_EQ(s.error_message(), "worker " + addresses_[2] + " has no next worker to probe");
  EXPECT_TRUE(probe(addresses_[0], 1).ok());
  // Refusals change nothing: the chain serves the next frames as before.
  const auto r = master.serve(frames_);
  EXPECT_LE(max_difference(r), 1e-5);
}

TEST_F(ServeChain, AWorkerWithOtherWeightsRefusesThePlan) {
  auto o = options(false);
  o.weights = "00000000";
  ServeMaster master(*graph_, o);
  try {
    master.configure(stages_, 1);
    FAIL() << "configured workers holding other weights";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("(another checkpoint)"), std::string::npos) << e.what();
  }
}

/// Opens a TCP connection to `address` (127.0.0.1:PORT), writes `bytes`, reads until the peer
/// closes or half a second passes, and closes.
void send_raw(const std::string& address, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  timeval wait{0, 500000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  char buffer[4096];
  while (::recv(fd, buffer, sizeof(buffer), 0) > 0) {
  }
  ::close(fd);
}

/// What a stranger might send to a worker's port: random bytes, an HTTP/1 request, an HTTP/2
/// preface with a wrong magic, and a right preface followed by a frame of an unknown kind and a
/// length beyond the data.
std::vector<std::string> garbage() {
  std::mt19937 rng(3);
  std::string random(4096, '\0');
  for (auto& c : random) c = static_cast<char>(rng());
  const std::string preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  std::string bad_frame = preface + std::string("\x00\xff\xff\x42\x00\x00\x00\x00\x01", 9);
  bad_frame += random.substr(0, 100);
  return {random, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
          "PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n" + random.substr(0, 64), bad_frame};
}

TEST_F(ServeChain, GarbageOnAWorkersPortLeavesItServing) {
  for (const auto& a : addresses_)
    for (const auto& bytes : garbage()) send_raw(a, bytes);
  ServeMaster master(*graph_, options(false));
  master.configure(stages_, 1);
  EXPECT_LE(max_difference(master.serve(frames_)), 1e-5);
  for (pid_t p : pids_) EXPECT_FALSE(poll_process(p).has_value());
}

/// A CA and a certificate it signs for 127.0.0.1 and localhost (every process of a chain shows
/// the same one), and a second CA signing a stranger's, made with Debian's openssl in `dir`.
void make_certificates(const fs::path& dir) {
  const std::string d = dir.string();
  auto sh = [](const std::string& command) {
    ASSERT_EQ(std::system((command + " > /dev/null 2>&1").c_str()), 0) << command;
  };
  for (const std::string ca : {"ca", "stranger_ca"})
    sh("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=igb test " + ca +
       "' -keyout " + d + "/" + ca + ".key -out " + d + "/" + ca + ".crt");
  std::ofstream(dir / "san.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  for (const auto& [who, ca] :
       {std::pair<std::string, std::string>{"peer", "ca"}, {"stranger", "stranger_ca"}}) {
    sh("openssl req -newkey rsa:2048 -nodes -subj '/CN=igb test " + who + "' -keyout " + d + "/" +
       who + ".key -out " + d + "/" + who + ".csr");
    sh("openssl x509 -req -days 2 -in " + d + "/" + who + ".csr -CA " + d + "/" + ca +
       ".crt -CAkey " + d + "/" + ca + ".key -CAcreateserial -extfile " + d + "/san.ext -out " + d +
       "/" + who + ".crt");
  }
}

TlsFiles tls_files(const fs::path& dir, const std::string& who, const std::string& ca) {
  return {(dir / (who + ".crt")).string(), (dir / (who + ".key")).string(),
          (dir / (ca + ".crt")).string()};
}

/// The chain of ServeChain with every process on mutual TLS (this test process too).
class TlsServeChain : public ServeChain {
 protected:
  std::vector<std::string> worker_args() override {
    const auto f = tls_files(dir_, "peer", "ca");
    return {"--tls-cert", f.cert, "--tls-key", f.key, "--tls-ca", f.ca};
  }
  void SetUp() override {
    make_certificates(dir_);
    set_transport_security(tls_files(dir_, "peer", "ca"), false);
    ServeChain::SetUp();
  }
  void TearDown() override {
    ServeChain::TearDown();
    set_transport_security({}, false);
  }
  /// Whether worker `i`'s log says, within 5 s, that it refused a connection.
  bool worker_refused(int i) {
    for (int k = 0; k < 50; ++k) {
      const auto log = read_text_file(dir_ / ("worker" + std::to_string(i) + ".log"));
      if (log.find("igb-serve: refused a connection: TLS handshake failed") != std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
};

TEST_F(TlsServeChain, AChainOnMutualTlsGivesTheModelsOutput) {
  for (const auto& bytes : garbage()) send_raw(addresses_[0], bytes);
  ServeMaster master(*graph_, options(false));
  master.configure(stages_, 1);
  EXPECT_LE(max_difference(master.serve(frames_)), 1e-5);
}

TEST_F(TlsServeChain, APeerWithoutTheCasCertificateIsRefusedOnBothSides) {
  // A plaintext client: the worker refuses the handshake and says so; the client names the
  // worker and what it needs.
  set_transport_security({}, false);
  try {
    worker_report(addresses_[0], 1500);
    FAIL() << "a plaintext client was answered";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("worker " + addresses_[0] +
                                         " could not be connected to within 1500 ms"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("it may require TLS"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(worker_refused(0));
  // A client whose certificate another CA signed: refused the same way (it refuses the
  // worker's certificate, too).
  set_transport_security(tls_files(dir_, "stranger", "stranger_ca"), false);
  try {
    worker_report(addresses_[1], 1500);
    FAIL() << "a client of another CA was answered";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("must be signed by the same --tls-ca"), std::string::npos)
        << e.what();
  }
  // The other direction: a TLS master refuses a plaintext worker.
  set_transport_security(tls_files(dir_, "peer", "ca"), false);
  const auto plain = "127.0.0.1:" + std::to_string(free_local_port());
  pids_.push_back(start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen",
                                 plain, "--model", "resnet20_cifar", "--threads", "1"},
                                dir_ / "plain.log"));
  try {
    worker_report(plain, 3000);
    FAIL() << "a TLS client accepted a plaintext worker";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("worker " + plain + " could not be connected"),
              std::string::npos)
        << e.what();
  }
  // Refusals change nothing: the chain serves.
  ServeMaster master(*graph_, options(false));
  master.configure(stages_, 1);
  EXPECT_LE(max_difference(master.serve(frames_)), 1e-5);
}

TEST(ServeCommand, ListeningBeyondLoopbackNeedsTlsOrInsecure) {
  const auto r = test::run_app("igb-serve worker --model resnet20_cifar --listen 0.0.0.0:0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--listen 0.0.0.0:0: listening beyond this machine needs mutual TLS "
                          "(--tls-cert, --tls-key, --tls-ca) or, to let anyone on the network "
                          "control it, --insecure"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.lines().size(), 1u) << r.output;
  const auto missing = test::run_app(
      "igb-serve worker --model resnet20_cifar --tls-cert /nonexistent.pem --tls-key k --tls-ca c");
  EXPECT_EQ(missing.code, 2) << missing.output;
  EXPECT_NE(missing.output.find("--tls-cert /nonexistent.pem: cannot read the file"),
            std::string::npos)
      << missing.output;
  test::TempDir tmp;
  const auto port = free_local_port();
  const pid_t p =
      start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--model", "resnet20_cifar",
                     "--threads", "1", "--insecure", "--listen", "0.0.0.0:" + std::to_string(port)},
                    tmp.path() / "w.log");
  // It listens on every interface, loopback included.
  EXPECT_EQ(worker_report("127.0.0.1:" + std::to_string(port), 60000).model, "resnet20_cifar");
  ::kill(p, SIGKILL);
  wait_process(p);
}

// docs/library.md, step by step: plan resnet20_cifar on two devices, write and read the plan,
// serve it on in-process workers, predict it with the simulator and re-plan from the workers'
// measurements; no command line anywhere.
/// `serving` as ServeMaster::measure_serving measured it on the plan `assignment` (stages on
/// `devices`), and what ServedChain::set_serving makes of it on `chain`.
void check_serving_costs(const ServingCosts& serving, const ServedChain& chain,
                         const graph::SummaryGraph& graph, const Assignment& assignment,
                         const std::vector<int>& devices) {
  ASSERT_EQ(serving.frames, 3);
  for (const auto* way : {&serving.one_at_a_time, &serving.back_to_back}) {
    EXPECT_GT(way->master_cpu_ms, 0);
    EXPECT_GT(way->latency_ms, 0);
    ASSERT_EQ(way->worker_cpu_ms.size(), devices.size());
    ASSERT_EQ(way->compute_cpu_ms.size(), devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      // Each stage computed; its worker's process (here this one) did that and more.
      EXPECT_GT(way->compute_cpu_ms[i], 0) << i;
      EXPECT_GE(way->worker_cpu_ms[i], way->compute_cpu_ms[i]) << i;
    }
  }
  // The simulator, frames far apart, gives the latency measured one at a time: with a share of
  // the processes' other work on the frame's path, or all of it and a wait on the hops.
  const auto far_apart = [&](const ServedChain& c, double latency_ms) {
    return c.simulate(graph, assignment, serving.frames, 1000.0 / (4 * latency_ms)).mean_latency_ms;
  };
  ServedChain c = chain;
  c.set_serving(serving, devices, graph, assignment);
  const double measured = serving.one_at_a_time.latency_ms;
  EXPECT_GE(c.serving_path_share, 0);
  EXPECT_LE(c.serving_path_share, 1);
  if (c.serving_path_share > 0) EXPECT_NEAR(far_apart(c, measured), measured, 1e-3 * measured);
  // Slower than any share makes it: all of it, and the rest as waits.
  ServingCosts slow = serving;
  slow.one_at_a_time.latency_ms = 1000;
  c.set_serving(slow, devices, graph, assignment);
  EXPECT_EQ(c.serving_path_share, 1);
  EXPECT_GT(c.serving_wait_ms, 0);
  EXPECT_NEAR(far_apart(c, 1000), 1000, 1e-6 * 1000);
  // Faster than the stages compute: none of it, no wait.
  ServingCosts fast = serving;
  fast.one_at_a_time.latency_ms = 1e-6;
  c.set_serving(fast, devices, graph, assignment);
  EXPECT_EQ(c.serving_path_share, 0);
  EXPECT_EQ(c.serving_wait_ms, 0);
  // Back to back, the processes' work a frame bounds the throughput on this machine's cores.
  c.set_serving(serving, devices, graph, assignment);
  double per_frame = serving.back_to_back.master_cpu_ms;
  for (double w : serving.back_to_back.worker_cpu_ms) per_frame += w;
  EXPECT_LE(c.simulate(graph, assignment, 60, 0).steady_fps,
            1000.0 * c.host_cores.at(0) / per_frame * 1.02);
  // A chain without some of its devices has not been measured.
  EXPECT_EQ(chain_without(c, {devices.front()}).serving.frames, 0);
}

TEST(Library, PlansWritesReadsAndServesAModelWithoutTheCli) {
  const auto zoo = zoo_model("resnet20_cifar", 32);
  auto model = zoo.model;
  const auto& forward = zoo.forward;
  const auto& graph = zoo.graph;
  DevicesFile chain;
  chain.devices = {{"camera", {}, 0.25}, {"server", {}, 4.0}};
  chain.links = {{2e6, 5}};
  chain.sink = 1;
  const auto here = measure_layer_costs(*model, graph, forward, 2);
  ModelPartitionInputs in;
  in.costs = {here, here};
  in.precision = TransferPrecision::kFp16;
  const auto problem = partition_problem(graph, chain, in);
  const auto best = solve_partition(problem, PartitionObjective::kLatency);
  ASSERT_TRUE(best.cost.valid) << best.cost.why_invalid;

  test::TempDir tmp;
  PlanFile plan;
  plan.model = "resnet20_cifar";
  plan.input = graph.input_shape();
  plan.devices_file = "chain.yaml";
  plan.plans = {plan_file_entry(problem, best)};
  write_plan_file(plan, tmp.path() / "plans" / "plan.json");
  const auto again = read_plan_file(tmp.path() / "plans" / "plan.json");
  const Assignment assignment = again.assignment(graph);
  EXPECT_EQ(assignment, best.assignment);

  // A camera four times slower than this machine and a server four times faster: the plan keeps
  // the camera's part small, and both devices are used (the frame starts on the camera).
  const auto stages = split_stages(graph, assignment, again.device_names());
  ASSERT_GE(stages.size(), 1u);
  std::vector<std::unique_ptr<StageWorker>> workers;
  MasterOptions mo;
  for (size_t i = 0; i < stages.size(); ++i) {
    workers.push_back(std::make_unique<StageWorker>(*model, graph, forward, WorkerOptions()));
    mo.workers.push_back(workers.back()->start());
  }
  mo.weights = weights_digest(*model);
  mo.precision = in.precision;
  torch::manual_seed(3);
  std::vector<at::Tensor> frames;
  for (int i = 0; i < 3; ++i) frames.push_back(torch::rand({1, 3, 32, 32}));
  std::vector<HopCost> hops;
  ServingCosts serving;
  {
    ServeMaster master(graph, mo);
    master.configure(stages, 1);
    hops = master.probe_hops(3);
    // The frames served one at a time and back to back; the stream starts afresh after them.
    serving = master.measure_serving(frames);
    master.configure(stages, 2);
    const ServeResult result = master.serve(frames);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < frames.size(); ++i) {
      const auto ref = model->forward(frames[i]);
      // FP16 on the link: the chain's output is the model's within half precision.
      EXPECT_LT((result.outputs[i][0] - ref).abs().max().item<double>(),
                2e-2 * std::max(1.0, ref.abs().max().item<double>()));
    }
  }
  // Every hop probed: the master's frame to the first worker, between workers, the results back.
  ASSERT_EQ(hops.size(), stages.size() + 1);
  EXPECT_EQ(hops.front().from, "master");
  EXPECT_EQ(hops.back().to, "master");
  for (const auto& h : hops) {
    EXPECT_GT(h.message_ms, 0) << h.from << " -> " << h.to;
    EXPECT_LT(h.message_ms, 1000) << h.from << " -> " << h.to;
    EXPECT_TRUE(std::isfinite(h.ms_per_mb) && h.ms_per_mb >= 0);
    EXPECT_TRUE(std::isfinite(h.cpu_ms) && h.cpu_ms >= 0);
  }

  ServedChain served;
  served.devices = chain;
  served.costs = {here, here};
  served.precision = in.precision;
  const auto predicted = served.simulate(graph, assignment, 30, 0);
  // Frames back to back: the first frame's latency is the plan's.
  EXPECT_NEAR(predicted.latency_ms.front(), best.cost.latency_ms, 1e-6 * best.cost.latency_ms);
  {
    // With the probed hops the link costs its message's work too, and the master's two hops are
    // simulated: the first frame takes at least their work more.
    ServedChain probed = served;
    std::vector<int> devices;
    for (const auto& st : stages) devices.push_back(st.device);
    probed.set_hops(hops, devices);
    if (stages.size() > 1)
      EXPECT_DOUBLE_EQ(probed.devices.links.at(static_cast<size_t>(devices[1] - 1)).message_ms,
                       hops[1].cpu_ms);
    const auto with_hops = probed.simulate(graph, assignment, 30, 0);
    EXPECT_GE(with_hops.latency_ms.front(),
              predicted.latency_ms.front() + hops.front().cpu_ms + hops.back().cpu_ms);
    // The workers run in this process: one machine, which the master shares.
    std::vector<WorkerInfo> infos;
    for (const auto& address : mo.workers) infos.push_back(worker_report(address, 10000));
    probed.set_hosts(infos, devices, infos.at(0).host, infos.at(0).cores);
    EXPECT_EQ(probed.master_host, 0);
    for (int d : devices) EXPECT_EQ(probed.device_host.at(static_cast<size_t>(d)), 0);
    EXPECT_EQ(probed.host_cores.at(0), infos.at(0).cores);
    // Sharing this machine's cores, no frame finishes earlier than on machines of its own: a
    // shared core only lengthens a service, and FIFO servers in series pass that on (no wake-up
    // costs here, which a frame finding its server busy would skip). The rate between the
    // first and the last completion (steady_fps) may rise when the first is delayed more.
    const auto shared = probed.simulate(graph, assignment, 30, 0);
    ASSERT_EQ(shared.done_ms.size(), with_hops.done_ms.size());
    for (size_t i = 0; i < shared.done_ms.size(); ++i)
      EXPECT_GE(shared.done_ms[i], with_hops.done_ms[i] - 1e-9) << "frame " << i;
    EXPECT_LE(shared.throughput_fps, with_hops.throughput_fps + 1e-9);
    check_serving_costs(serving, probed, graph, assignment, devices);
  }
  std::vector<WorkerInfo> reports;
  for (const auto& address : mo.workers) reports.push_back(worker_report(address, 10000, true));
  const auto next = replan_chain(graph, served, assignment, again.device_names(), reports,
                                 PartitionObjective::kLatency);
  // The workers run on this machine: each device with a stage has speed 1 in the measured chain
  // and the costs its worker reported.
  for (const auto& st : stages)
    EXPECT_EQ(next.chain.devices.devices.at(static_cast<size_t>(st.device)).speed, 1.0);
  EXPECT_EQ(next.chain.costs.at(static_cast<size_t>(stages[0].device)).ms, reports[0].costs);
  EXPECT_EQ(next.assignment.size(), assignment.size());
  EXPECT_EQ(next.changed, next.assignment != assignment);
  for (auto& w : workers) w->shutdown();
}

/// A Worker service that keeps what it is delivered.
class DeliveryRecorder : public proto::Worker::Service {
 public:
  grpc::Status Deliver(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) override {
    std::lock_guard<std::mutex> lock(mutex_);
    frames_.push_back(*frame);
    return grpc::Status::OK;
  }
  std::vector<proto::Frame> frames() {
    std::lock_guard<std::mutex> lock(mutex_);
    return frames_;
  }

 private:
  std::mutex mutex_;
  std::vector<proto::Frame> frames_;
};

TEST(LinkSender, ADiffStreamStartsAtItsFirstFrameWhicheverIsGivenFirst) {
  // A worker may finish a stream's second frame before its first (two deliveries decoded at
  // once): the sender holds it until the first has gone, whole, and sends it as a difference.
  DeliveryRecorder recorder;
  std::string address;
  const auto server = start_server("127.0.0.1:0", &recorder, "--listen", &address);
  LinkSender sender(address, "the recorder", LinkEmulation(), TransferPrecision::kFp32,
                    /*diff=*/true, 5000, nullptr);
  const auto frame = [](int64_t seq, float value) {
    OutgoingFrame f;
    f.frame.set_id(static_cast<uint64_t>(seq));
    f.frame.set_seq(seq);
    f.tensors.emplace_back("x", torch::full({16}, value));
    return f;
  };
  sender.send(frame(1, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(recorder.frames().empty());
  sender.send(frame(0, 1));
  for (int i = 0; i < 500 && recorder.frames().size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  auto got = recorder.frames();
  ASSERT_EQ(got.size(), 2u);
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.seq() < b.seq(); });
  EXPECT_FALSE(got[0].tensors(0).difference());
  EXPECT_TRUE(got[1].tensors(0).difference());
  DiffDecoder decoder;
  EXPECT_TRUE(
      decoder.decode(from_proto(got[0].tensors(0)), "seq 0").equal(torch::full({16}, 1.0f)));
  EXPECT_TRUE(
      decoder.decode(from_proto(got[1].tensors(0)), "seq 1").equal(torch::full({16}, 2.0f)));
  server->Shutdown();
}

TEST(ServeCommand, APortOutsideTheRangeIsRefusedNotWrapped) {
  // gRPC reads 99999 as 99999 - 65536 = 34463 and would listen there.
  for (const char* port : {"99999", "65536", "1000000"}) {
    const auto r = test::run_app(std::string("igb-serve worker --model resnet20_cifar --listen "
                                             "127.0.0.1:") +
                                 port);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(std::string("--listen 127.0.0.1:") + port +
                            ": the port must be from 0 to 65535"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("listening on"), std::string::npos) << r.output;
  }
}

/// Runs 300 frames of vtest.avi at 100 frames/s through three workers of a 3-stage plan of
/// resnet20_cifar with `--timeout 1`, sends `signal` to the middle worker after the master has
/// served 50, and checks that every frame comes back once, equal to the model's forward pass,
/// with the lost worker named, the new plan on the other two, and the results resuming within 2 s.
/// With `rejoin`, at 50 frames/s, a new worker is started at the lost one's address and the
/// master (--rejoin) takes it back: a second plan on all three.
void check_failover(int signal, bool rejoin = false) {
  // Real frames: opencv-doc's video, which ctest otherwise hides from the tests.
  const test::RealOpencvSamples samples;
  const std::string why = data::opencv_sample_unavailable("vtest.avi");
  if (!why.empty()) GTEST_SKIP() << "real data absent: " << why;
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  // Three slow devices joined by fast links: the throughput plan uses all three.
  std::ofstream(dir / "devices.yaml")
      << "devices:\n  - {name: a, speed: 0.2}\n  - {name: b, speed: 0.2}\n"
         "  - {name: c, speed: 0.2}\nlinks:\n  - {bandwidth_mb_s: 500, latency_ms: 0.1}\n"
         "  - {bandwidth_mb_s: 500, latency_ms: 0.1}\n";
  const std::string cache = " --threads 1 --cache-dir " + (dir / "cache").string();
  auto r = test::run_app(
      "igb-tools partition --model resnet20_cifar --objective throughput "
      "--devices " +
      (dir / "devices.yaml").string() + cache + " --out " + (dir / "plan").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto plan = json::parse(std::ifstream(dir / "plan" / "plan.json"));
  for (const auto& d : plan["plans"][0]["devices"]) ASSERT_FALSE(d["ops"].empty()) << plan.dump();
  std::vector<std::string> addresses;
  std::vector<pid_t> pids;
  for (int i = 0; i < 3; ++i) {
    addresses.push_back("127.0.0.1:" + std::to_string(free_local_port()));
    pids.push_back(start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen",
                                  addresses.back(), "--model", "resnet20_cifar", "--threads", "1"},
                                 dir / ("w" + std::to_string(i) + ".log")));
  }
  for (const auto& a : addresses) worker_report(a, 60000);
  std::vector<std::string> argv = {std::string(IGB_BIN_DIR) + "/igb-serve",
                                   "master",
                                   "--plan",
                                   (dir / "plan" / "plan.json").string(),
                                   "--workers",
                                   addresses[0] + "," + addresses[1] + "," + addresses[2],
                                   "--model",
                                   "resnet20_cifar",
                                   "--input",
                                   data::opencv_sample("vtest.avi", "test").string(),
                                   "--frames",
                                   "300",
                                   "--rate",
                                   rejoin ? "50" : "100",
                                   "--timeout",
                                   "1",
                                   "--verify",
                                   "--threads",
                                   "1",
                                   "--cache-dir",
                                   (dir / "cache").string(),
                                   "--out",
                                   (dir / "out").string()};
  if (rejoin) argv.push_back("--rejoin");
  const pid_t master = start_process(argv, dir / "master.log");
  for (int k = 0; k < 600; ++k) {
    if (fs::exists(dir / "master.log") &&
        read_text_file(dir / "master.log").find("50/300 frames served") != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pids[1], signal);
  if (rejoin) {
    wait_process(pids[1]);
    pids[1] = start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen",
                             addresses[1], "--model", "resnet20_cifar", "--threads", "1"},
                            dir / "w1_again.log");
  }
  const int code = wait_process(master);
  for (pid_t p : pids) {
    ::kill(p, SIGCONT);
    ::kill(p, SIGKILL);
    wait_process(p);
  }
  const auto log = read_text_file(dir / "master.log");
  ASSERT_EQ(code, 0) << log;
  const auto report = json::parse(std::ifstream(dir / "out" / "serve.json"));
  EXPECT_EQ(report["answered"], 300);
  EXPECT_LE(report["verify_max_abs_diff"].get<double>(), 1e-5);
  ASSERT_EQ(report["failovers"].size(), rejoin ? 2u : 1u) << log;
  const auto& f = report["failovers"][0];
  if (rejoin) {
    const auto& back = report["failovers"][1];
    EXPECT_EQ(back["rejoined"], json::array({addresses[1]})) << log;
    EXPECT_NE(back["plan"].get<std::string>().find("3 stages"), std::string::npos) << log;
    EXPECT_NE(log.find("took back " + addresses[1] + " at frame "), std::string::npos) << log;
  }
  EXPECT_EQ(f["lost"], json::array({addresses[1]})) << log;
  EXPECT_NE(f["plan"].get<std::string>().find("2 stages (a on " + addresses[0]), std::string::npos)
      << log;
  EXPECT_NE(f["plan"].get<std::string>().find("c on " + addresses[2]), std::string::npos) << log;
  EXPECT_NE(log.find("lost " + addresses[1] + " at frame "), std::string::npos) << log;
  EXPECT_NE(log.find("300 frames answered, none lost"), std::string::npos) << log;
  // The results' gap around the loss: the last before it to the first after the new plan.
  std::ifstream csv(dir / "out" / "serve_frames.csv");
  std::string line;
  std::getline(csv, line);
  double previous = -1, gap = 0;
  int rows = 0;
  while (std::getline(csv, line)) {
    const auto a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
    const double done = std::stod(line.substr(b + 1, c - b - 1));
    if (previous >= 0) gap = std::max(gap, done - previous);
    previous = done;
    ++rows;
  }
  EXPECT_EQ(rows, 300);
  std::printf(
      "[ failover ] signal %d: lost at frame %d, %d re-sent, results resumed after %.0f ms\n",
      signal, f["frame"].get<int>(), f["resent"].get<int>(), gap);
  EXPECT_LT(gap, 2000.0) << log;
}

/// Resident memory of process `pid`, kB.
int64_t resident_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}

/// Sends 120 frames of ResNet-18 at 224x224 (600 kB each) back to back to one worker emulating a
/// machine 10 times slower than this one, with `--max-queue max_queue`; returns the worker's
/// resident memory (kB) once configured and idle, and its peak over 4 s of that overload.
std::pair<int64_t, int64_t> overload(const std::string& max_queue, const fs::path& dir) {
  const auto address = "127.0.0.1:" + std::to_string(free_local_port());
  const pid_t worker =
      start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen", address,
                     "--model", "resnet18", "--input", "1x3x224x224", "--threads", "1",
                     "--compute-speed", "0.1", "--max-queue", max_queue},
                    dir / ("worker" + max_queue + ".log"));
  worker_report(address, 60000);
  const auto zoo = zoo_model("resnet18", 224);
  auto model = zoo.model;
  const auto& graph = zoo.graph;
  MasterOptions o;
  o.workers = {address};
  o.timeout_ms = 60000;
  o.weights = weights_digest(*model);
  ServeMaster master(graph, o);
  master.configure(split_stages(graph, Assignment(graph.ops().size(), 0), {"one"}), 1);
  const int64_t idle = resident_kb(worker);
  std::vector<at::Tensor> frames;
  for (int i = 0; i < 120; ++i) frames.push_back(torch::rand({1, 3, 224, 224}));
  std::thread serving([&] {
    try {
      master.serve(frames);
    } catch (const std::exception&) {
      // The worker is killed below.
    }
  });
  int64_t peak = 0;
  for (int k = 0; k < 8; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    peak = std::max(peak, resident_kb(worker));
  }
  ::kill(worker, SIGKILL);
  wait_process(worker);
  serving.join();
  return {idle, peak};
}

// Frames sent far faster than a worker computes them: with --max-queue 4 the worker holds 4 and
// its sender waits, so its memory stays flat; without, it grows with every frame sent.
TEST(ServeCommand, AnOverloadedWorkerWithMaxQueueKeepsItsMemoryFlat) {
  test::TempDir tmp;
  const auto [idle, bounded] = overload("4", tmp.path());
  const auto [idle0, unbounded] = overload("0", tmp.path());
  std::printf(
      "[ overload ] worker resident memory: --max-queue 4: idle %lld kB, overloaded %lld kB; "
      "no limit: idle %lld kB, overloaded %lld kB\n",
      static_cast<long long>(idle), static_cast<long long>(bounded), static_cast<long long>(idle0),
      static_cast<long long>(unbounded));
  EXPECT_GT(idle, 0);
  EXPECT_LT(bounded, 2 * idle);
  // 120 frames of 600 kB arrive in the 4 s: some 70 MB unbounded; 4 of them bounded.
  EXPECT_LT(bounded - idle, 30000);
  EXPECT_GT(unbounded - idle0, bounded - idle + 30000);
}

// Frames at 1,000 a second into a worker that takes one in about 30 ms: with a link of 2 frames
// and --drop-late 50 ms, the master drops the frames it cannot send in time, counts them, and
// every frame it sends comes back equal to the model's forward pass.
TEST(ServeCommand, FramesLaterThanDropLateAreDroppedAndCounted) {
  test::TempDir tmp;
  const auto address = "127.0.0.1:" + std::to_string(free_local_port());
  const pid_t worker = start_process(
      {std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen", address, "--model",
       "resnet20_cifar", "--threads", "1", "--compute-speed", "0.05", "--max-queue", "2"},
      tmp.path() / "worker.log");
  worker_report(address, 60000);
  const auto zoo = zoo_model("resnet20_cifar", 32);
  auto model = zoo.model;
  const auto& graph = zoo.graph;
  MasterOptions o;
  o.workers = {address};
  o.timeout_ms = 20000;
  o.weights = weights_digest(*model);
  o.rate_fps = 1000;
  o.max_queue = 2;
  o.drop_late_ms = 50;
  ServeMaster master(graph, o);
  master.configure(split_stages(graph, Assignment(graph.ops().size(), 0), {"one"}), 1);
  std::vector<at::Tensor> frames;
  for (int i = 0; i < 200; ++i) frames.push_back(torch::rand({1, 3, 32, 32}));
  const auto r = master.serve(frames);
  ::kill(worker, SIGKILL);
  wait_process(worker);
  std::printf("[ drop-late ] %d of 200 frames dropped, throughput %.1f frames/s\n", r.dropped_count,
              r.steady_fps);
  EXPECT_GT(r.dropped_count, 20);
  EXPECT_LT(r.dropped_count, 200);
  ASSERT_EQ(r.dropped.size(), 200u);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (r.dropped[i]) {
      EXPECT_TRUE(r.outputs[i].empty()) << i;
      continue;
    }
    ASSERT_EQ(r.outputs[i].size(), 1u) << i;
    EXPECT_LT((r.outputs[i][0] - model->forward(frames[i])).abs().max().item<double>(), 1e-4) << i;
  }
}

TEST(ServeCommand, AKilledWorkerIsPlannedAroundWithNoFrameLostOrAnsweredTwice) {
  check_failover(SIGKILL);
}

TEST(ServeCommand, AStoppedWorkerIsPlannedAroundWithNoFrameLostOrAnsweredTwice) {
  check_failover(SIGSTOP);
}

TEST(ServeCommand, ALostWorkerThatComesBackIsTakenBackWithRejoin) { check_failover(SIGKILL, true); }

TEST(ServeCommand, MasterRunsAPartitionPlanAndReportsTheSimulatorBesideTheMeasurement) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  {
    std::ofstream f(dir / "devices.yaml");
    f << "devices:\n  - {name: a}\n  - {name: b}\n  - {name: c}\n"
         "links:\n  - {bandwidth_mb_s: 50, latency_ms: 1}\n  - {bandwidth_mb_s: 50, latency_ms: "
         "1}\n";
  }
  fs::create_directories(dir / "frames");
  torch::manual_seed(3);
  for (int i = 0; i < 4; ++i)
    data::write_image(dir / "frames" / ("f" + std::to_string(i) + ".png"),
                      torch::rand({3, 32, 32}));
  auto r = test::run_app("igb-tools partition --model resnet20_cifar --devices " +
                         (dir / "devices.yaml").string() + " --threads 1 --cache-dir " +
                         (dir / "cache").string() + " --out " + (dir / "plan").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto plan = json::parse(std::ifstream(dir / "plan" / "plan.json"));
  int used = 0;
  for (const auto& d : plan["plans"][0]["devices"]) used += d["ops"].empty() ? 0 : 1;
  std::vector<std::string> addresses;
  std::vector<pid_t> pids;
  for (int i = 0; i < used; ++i) {
    addresses.push_back("127.0.0.1:" + std::to_string(free_local_port()));
    pids.push_back(start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen",
                                  addresses.back(), "--model", "resnet20_cifar", "--threads", "1"},
                                 dir / ("w" + std::to_string(i) + ".log")));
  }
  std::string workers;
  for (const auto& a : addresses) workers += (workers.empty() ? "" : ",") + a;
  r = test::run_app("igb-serve master --plan " + (dir / "plan" / "plan.json").string() +
                    " --workers " + workers + " --model resnet20_cifar --input " +
                    (dir / "frames").string() +
                    " --frames 4 --mode diff --verify --replan --threads 1 " + "--cache-dir " +
                    (dir / "cache").string() + " --out " + (dir / "out").string());
  // The same master under a file-size limit below serve.json's size: one line naming the file
  // with the reason, exit 2, the folder's earlier report intact and no temporary left beside it.
  const std::string served = r.code == 0 ? read_text_file(dir / "out" / "serve.json") : "";
  const auto limited =
      test::run_app("igb-serve master --plan " + (dir / "plan" / "plan.json").string() +
                        " --workers " + workers + " --model resnet20_cifar --input " +
                        (dir / "frames").string() + " --frames 2 --threads 1 --cache-dir " +
                        (dir / "cache").string() + " --out " + (dir / "out").string(),
                    "prlimit --fsize=" + std::to_string(served.size() / 4) + " ");
  for (pid_t p : pids) {
    ::kill(p, SIGKILL);
    wait_process(p);
  }
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(limited.code, 2) << limited.output;
  EXPECT_NE(limited.output.find("igb-serve: error: cannot write " +
                                (dir / "out" / "serve.json").string() + ": File too large\n"),
            std::string::npos)
      << limited.output;
  EXPECT_EQ(read_text_file(dir / "out" / "serve.json"), served);
  for (const auto& e : fs::directory_iterator(dir / "out"))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  EXPECT_NE(r.output.find("Measured against the simulator"), std::string::npos) << r.output;
  // --replan: after the first frame, a plan from the workers' own measurements (3 frames left).
  EXPECT_NE(r.output.find("re-planned from the workers' measurements"), std::string::npos)
      << r.output;
  const auto report = json::parse(std::ifstream(dir / "out" / "serve.json"));
  EXPECT_EQ(report["frames"], 3);
  EXPECT_LE(report["verify_max_abs_diff"].get<double>(), 1e-5);
  EXPECT_GT(report["simulated"]["throughput_fps"].get<double>(), 0);
  EXPECT_GT(report["throughput_fps"].get<double>(), 0);
  // Each hop probed after configuring, the master's two included.
  EXPECT_NE(r.output.find("Hops (20 probes"), std::string::npos) << r.output;
  ASSERT_EQ(report["hops"].size(), static_cast<size_t>(used + 1));
  for (const auto& h : report["hops"]) EXPECT_GT(h["message_ms"].get<double>(), 0) << h;
  // Frames served one at a time and back to back before the stream (100 by default, the 4 frames
  // over again): each process's CPU a frame, and the share of it on a frame's path.
  EXPECT_NE(r.output.find("Serving costs (100 frames one at a time, then back to back"),
            std::string::npos)
      << r.output;
  ASSERT_TRUE(report.contains("serving")) << report.dump();
  EXPECT_EQ(report["serving"]["frames"], 100);
  EXPECT_EQ(report["serving"]["back_to_back"]["worker_cpu_ms"].size(), static_cast<size_t>(used));
  for (const char* way : {"one_at_a_time", "back_to_back"})
    for (const auto& ms : report["serving"][way]["compute_cpu_ms"]) EXPECT_GT(ms.get<double>(), 0);
  EXPECT_GE(report["serving"]["path_share"].get<double>(), 0);
  EXPECT_LE(report["serving"]["path_share"].get<double>(), 1);
  // Each stage's measured CPU beside the compute the simulator gives it.
  for (const auto& st : report["stages"]) {
    EXPECT_GT(st["simulated_compute_ms"].get<double>(), 0) << st;
    EXPECT_GT(st["compute_cpu_ms"].get<double>(), 0) << st;
  }
  // A plan for another model is refused in one line.
  r = test::run_app("igb-serve master --plan " + (dir / "plan" / "plan.json").string() +
                    " --workers " + workers + " --model resnet32_cifar --input " +
                    (dir / "frames").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("is for resnet20_cifar"), std::string::npos) << r.output;
  // One address too many is refused before any cost is measured: the only line.
  r = test::run_app("igb-serve master --plan " + (dir / "plan" / "plan.json").string() +
                    " --workers " + workers + ",127.0.0.1:1 --model resnet20_cifar --input " +
                    (dir / "frames").string() + " --cache-dir " + (dir / "cache2").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << r.output;
  EXPECT_NE(r.output.find("--workers gives " + std::to_string(used + 1) +
                          " addresses; the plan runs " + std::to_string(used) + " stages"),
            std::string::npos)
      << r.output;
  // A worker emulates slower machines only.
  r = test::run_app("igb-serve worker --model resnet20_cifar --compute-speed 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("--compute-speed must be in (0, 1]"), std::string::npos) << r.output;
}

// A model brought as an ONNX file (igb's own export of ResNet-20, docs/onnx-import.md) named
// onnx:PATH everywhere: partitioned, served by workers and a master that verifies the chain's
// output against the file's forward pass, and measured by an igb-bench plan beside its zoo twin.
TEST(ServeCommand, AnImportedOnnxFileIsPartitionedServedAndBenchmarked) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  const std::string model = "onnx:" + (dir / "r20.onnx").string();
  auto r = test::run_app("igb-tools export-onnx --model resnet20_cifar --out " +
                         (dir / "r20.onnx").string());
  ASSERT_EQ(r.code, 0) << r.output;
  {
    std::ofstream f(dir / "devices.yaml");
    f << "devices:\n  - {name: a}\n  - {name: b}\n  - {name: c}\n"
         "links:\n  - {bandwidth_mb_s: 50, latency_ms: 1}\n  - {bandwidth_mb_s: 50, latency_ms: "
         "1}\n";
  }
  fs::create_directories(dir / "frames");
  torch::manual_seed(4);
  for (int i = 0; i < 3; ++i)
    data::write_image(dir / "frames" / ("f" + std::to_string(i) + ".png"),
                      torch::rand({3, 32, 32}));
  r = test::run_app("igb-tools partition --model " + model + " --devices " +
                    (dir / "devices.yaml").string() + " --threads 1 --cache-dir " +
                    (dir / "cache").string() + " --out " + (dir / "plan").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto plan = json::parse(std::ifstream(dir / "plan" / "plan.json"));
  int used = 0;
  for (const auto& d : plan["plans"][0]["devices"]) used += d["ops"].empty() ? 0 : 1;
  std::vector<std::string> addresses;
  std::vector<pid_t> pids;
  for (int i = 0; i < used; ++i) {
    addresses.push_back("127.0.0.1:" + std::to_string(free_local_port()));
    pids.push_back(start_process({std::string(IGB_BIN_DIR) + "/igb-serve", "worker", "--listen",
                                  addresses.back(), "--model", model, "--threads", "1"},
                                 dir / ("w" + std::to_string(i) + ".log")));
  }
  for (const auto& a : addresses) worker_report(a, 60000);
  std::string workers;
  for (const auto& a : addresses) workers += (workers.empty() ? "" : ",") + a;
  r = test::run_app("igb-serve master --plan " + (dir / "plan" / "plan.json").string() +
                    " --workers " + workers + " --model " + model + " --input " +
                    (dir / "frames").string() + " --frames 3 --verify --threads 1 --cache-dir " +
                    (dir / "cache").string() + " --out " + (dir / "out").string());
  for (pid_t p : pids) {
    ::kill(p, SIGKILL);
    wait_process(p);
  }
  ASSERT_EQ(r.code, 0) << r.output;
  const auto report = json::parse(std::ifstream(dir / "out" / "serve.json"));
  EXPECT_EQ(report["frames"], 3);
  EXPECT_LE(report["verify_max_abs_diff"].get<double>(), 1e-5);
  {
    std::ofstream f(dir / "bench.yaml");
    f << "title: imported and zoo ResNet-20\ndefaults:\n  optform: classify\n  epochs: 1\n"
         "  options: {synthetic-train: 32, synthetic-val: 16, batch-size: 16, threads: 1}\n"
         "latency: {batch_size: 2, repeats: 1}\nruns:\n  - name: imported\n    model: "
      << model << "\n  - name: zoo\n    model: resnet20_cifar\n";
  }
  r = test::run_app("igb-bench --plan " + (dir / "bench.yaml").string() + " --out " +
                    (dir / "bench").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto bench = json::parse(std::ifstream(dir / "bench" / "bench.json"));
  std::map<std::string, json> runs;
  for (const auto& run : bench["runs"]) runs[run["run"].get<std::string>()] = run;
  ASSERT_EQ(runs.size(), 2u) << bench.dump();
  EXPECT_EQ(runs["imported"]["status"], "ok") << runs["imported"].dump();
  // The file is the zoo model's export: the same parameters and MACs.
  EXPECT_EQ(runs["imported"]["macs"], runs["zoo"]["macs"]) << bench.dump();
  EXPECT_EQ(runs["imported"]["params"], runs["zoo"]["params"]) << bench.dump();
}

// Hosts of a real network (test::NetLab: namespaces whose packets a relay delays, drops, reorders
// and rate-limits, as netem would): the master here, three workers each on a host of its own,
// every link 20 ms each way, 1 % of the packets lost, 1 % overtaking the others, 0.2 MB/s. The
// chain's output is the model's, and its throughput what the simulator predicts for those links and
// the probed hops.
TEST(ServeNetwork, AChainOverLinksThatLoseAndDelayPacketsIsExactAndFollowsTheSimulator) {
  if (const auto why = test::NetLab::unavailable(); !why.empty())
    GTEST_SKIP() << "no hosts can be made here: " << why;
  test::NetLab lab(4, 11);
  test::LinkShape link;
  link.delay_ms = 20;
  link.loss = 0.01;
  link.reorder = 0.01;
  link.bandwidth_mb_s = 0.2;
  for (int h = 0; h < 4; ++h) {
    lab.shape(h, (h + 1) % 4, link);
    lab.shape((h + 1) % 4, h, link);
  }
  test::TempDir tmp;
  std::vector<std::string> workers;
  std::vector<pid_t> pids;
  for (int h = 1; h <= 3; ++h) {
    workers.push_back(lab.address(h) + ":7000");
    auto argv = lab.on_host(h);
    for (const std::string a :
         {std::string(IGB_BIN_DIR) + "/igb-serve", std::string("worker"), std::string("--listen"),
          workers.back(), std::string("--model"), std::string("resnet20_cifar"),
          std::string("--input"), std::string("1x3x16x16"), std::string("--threads"),
          std::string("1"), std::string("--insecure")})
      argv.push_back(a);
    pids.push_back(start_process(argv, tmp.path() / ("w" + std::to_string(h) + ".log")));
  }
  std::vector<WorkerInfo> reports;
  for (const auto& w : workers) reports.push_back(worker_report(w, 60000));
  const auto zoo = zoo_model("resnet20_cifar", 16);
  auto model = zoo.model;
  const auto& forward = zoo.forward;
  const auto& graph = zoo.graph;
  const auto stages = resnet20_stages(graph);
  MasterOptions mo;
  mo.workers = workers;
  mo.listen = lab.address(0) + ":0";
  mo.timeout_ms = 30000;
  mo.weights = weights_digest(*model);
  torch::manual_seed(5);
  std::vector<at::Tensor> frames;
  for (int i = 0; i < 40; ++i) frames.push_back(torch::rand({1, 3, 16, 16}));
  std::vector<HopCost> hops;
  ServeResult r;
  {
    // The master listens on host 0's lab address: beyond loopback, without certificates.
    set_transport_security({}, true);
    ServeMaster master(graph, mo);
    master.configure(stages, 1);
    hops = master.probe_hops(3);
    r = master.serve(frames);
  }
  set_transport_security({}, false);
  for (pid_t p : pids) {
    ::kill(p, SIGKILL);
    wait_process(p);
  }
  // Every frame answered once, each the model's output: TCP carried them over the losses.
  for (size_t i = 0; i < frames.size(); ++i) {
    torch::NoGradGuard no_grad;
    const auto ref = model->forward(frames[i]);
    ASSERT_EQ(r.outputs[i].size(), 1u) << "frame " << i;
    EXPECT_LE((r.outputs[i][0] - ref).abs().max().item<double>(),
              1e-5 * ref.abs().max().item<double>())
        << "frame " << i;
  }
  EXPECT_GT(lab.count(1, 2).dropped, 0);
  EXPECT_GT(lab.count(1, 2).relayed, 100);
  // The probes saw the links' delay: 20 ms there and 20 back.
  for (const auto& h : hops)
    EXPECT_NEAR(h.propagation_ms(), 20, 8)
        << h.from << " -> " << h.to << ": " << h.message_ms << " ms, " << h.ms_per_mb
        << " ms/MB, CPU " << h.cpu_ms << " ms, " << h.cpu_ms_per_mb << " ms/MB";
  ServedChain chain;
  chain.devices.devices = {{"a"}, {"b"}, {"c"}};
  chain.devices.links = {{0.2e6, 20}, {0.2e6, 20}};
  chain.devices.sink = 2;
  const auto costs = measure_layer_costs(*model, graph, forward, 3);
  chain.costs = {costs, costs, costs};
  chain.set_hops(hops, {0, 1, 2});
  chain.set_hosts(reports, {0, 1, 2}, reports[0].host, reports[0].cores);
  Assignment assignment(graph.ops().size(), 0);
  for (const auto& st : stages)
    for (int op : st.ops) assignment[static_cast<size_t>(op)] = st.device;
  const auto predicted = chain.simulate(graph, assignment, static_cast<int>(frames.size()), 0);
  EXPECT_NEAR(r.steady_fps / predicted.steady_fps, 1.0, 0.2)
      << "measured " << r.steady_fps << " fps, simulated " << predicted.steady_fps;
}

}  // namespace
}  // namespace igb::deploy

namespace igb::deploy {
namespace {

/// The score halfway between the k-th and (k+1)-th smallest of `scores`: a threshold no sample
/// sits on, so a batch of one and a batch of all decide alike.
double between(const at::Tensor& scores, int64_t k) {
  const auto sorted = std::get<0>(scores.sort());
  return 0.5 * (sorted[k].item<double>() + sorted[k + 1].item<double>());
}

TEST(ServeCascade, ThreeUnitsAnswerAtTheFirstConfidentExitAsTheEvaluatorDecides) {
  test::TempDir tmp;
  const std::string exits = "layer1.2.relu2,layer2.2.relu2";
  torch::manual_seed(0);
  models::register_builtin_models();
  auto model = models::create_model("resnet20_cifar", {{"exits", exits}, {"exit_pool", "4"}});
  model->eval();
  auto m = model;
  const auto graph = graph::SummaryGraph::build(
      *m, {1, 3, 32, 32}, [m](const torch::Tensor& x) { return m->forward(x); }, "resnet20_cifar");
  const ExitNetwork net(*model, graph);
  ASSERT_EQ(net.exits(), 3u);
  torch::manual_seed(5);
  const auto x = torch::rand({24, 3, 32, 32});
  torch::NoGradGuard no_grad;
  const auto all = net.run_all(x);
  // About a third leave at each unit.
  const auto criterion = ExitCriterion::kMaxSoftmax;
  const std::vector<double> thresholds{between(exit_scores(all[0], criterion), 15),
                                       between(exit_scores(all[1], criterion), 11)};
  const auto decided = net.run(x, criterion, thresholds);
  // The manifest igb-tools early-exit --export writes, by the same exporter.
  export_exit_segments(*model, graph, net, criterion, thresholds,
                       OnnxExportOptions().dynamic_batch(true), tmp / "segments");
  std::vector<std::string> addresses;
  for (int u = 0; u < 3; ++u) addresses.push_back("127.0.0.1:" + std::to_string(free_local_port()));
  std::vector<pid_t> pids;
  for (int u = 0; u < 3; ++u) {
    std::vector<std::string> argv{std::string(IGB_BIN_DIR) + "/igb-serve",
                                  "worker",
                                  "--listen",
                                  addresses[u],
                                  "--model",
                                  "resnet20_cifar",
                                  "--model-arg",
                                  "exits=" + exits,
                                  "--model-arg",
                                  "exit_pool=4",
                                  "--threads",
                                  "1",
                                  "--cascade",
                                  (tmp / "segments" / "manifest.json").string(),
                                  "--unit",
                                  std::to_string(u)};
    if (u < 2) {
      argv.push_back("--next");
      argv.push_back(addresses[u + 1]);
    }
    pids.push_back(start_process(argv, tmp / ("unit" + std::to_string(u) + ".log")));
  }
  MasterOptions o;
  o.workers = {addresses[0]};
  o.timeout_ms = 20000;
  o.max_in_flight = 1;
  // Every unit is up (each only learns of a missing next unit when it forwards).
  for (size_t u = 1; u < addresses.size(); ++u) worker_report(addresses[u], 60000);
  ServeMaster client(o);
  const auto info = worker_report(addresses[0], 60000);
  EXPECT_TRUE(info.cascade);
  EXPECT_EQ(info.input_shape, (std::vector<int64_t>{1, 3, 32, 32}));
  client.attach(info.input_name);
  std::vector<at::Tensor> samples;
  for (int64_t i = 0; i < x.size(0); ++i) samples.push_back(x[i].unsqueeze(0));
  const auto r = client.serve(samples);
  std::vector<int> answered(3, 0);
  for (int64_t i = 0; i < x.size(0); ++i) {
    EXPECT_EQ(r.answered_by[i], decided.exit[i].item<int64_t>()) << "sample " << i;
    ASSERT_EQ(r.outputs[i].size(), 1u);
    EXPECT_LT((r.outputs[i][0][0] - decided.logits[i]).abs().max().item<double>(), 1e-4)
        << "sample " << i;
    ++answered.at(static_cast<size_t>(r.answered_by[i]));
  }
  for (int u = 0; u < 3; ++u) EXPECT_GT(answered[u], 0) << "unit " << u;
  // A sample that goes on to unit 2 passed through units 0 and 1: its hops say so.
  EXPECT_EQ(r.stages.size(), 3u);
  for (const auto& f : r.fallback) EXPECT_EQ(f, "");
  // The load generator: four clients at once, each sending the same 12 samples; every sample is
  // answered once per client, each client's answers those of one client alone.
  const std::string client_command =
      "igb-serve client --address " + addresses[0] + " --data synthetic --max-samples 12 --out ";
  auto one = test::run_app(client_command + (tmp / "one").string());
  auto four =
      test::run_app(client_command + (tmp / "four").string() + " --clients 4 --in-flight 2");
  ASSERT_EQ(one.code, 0) << one.output;
  ASSERT_EQ(four.code, 0) << four.output;
  const auto single = json::parse(std::ifstream(tmp / "one" / "client.json"));
  const auto load = json::parse(std::ifstream(tmp / "four" / "client.json"));
  EXPECT_EQ(load["load"]["clients"], 4);
  EXPECT_EQ(load["load"]["answered"], 48);
  EXPECT_EQ(load["load"]["lost"], 0);
  EXPECT_EQ(load["top1"], single["top1"]);
  ASSERT_EQ(load["units"].size(), single["units"].size());
  for (size_t u = 0; u < load["units"].size(); ++u)
    EXPECT_EQ(load["units"][u]["answered"].get<int>(),
              4 * single["units"][u]["answered"].get<int>());
  const auto& latency = load["load"]["latency_ms"];
  EXPECT_GT(latency["p50"].get<double>(), 0);
  EXPECT_LE(latency["p50"].get<double>(), latency["p95"].get<double>());
  EXPECT_LE(latency["p95"].get<double>(), latency["p99"].get<double>());
  EXPECT_GT(load["load"]["throughput_per_s"].get<double>(), 0);
  EXPECT_NE(four.output.find("4 clients: 48 answered, 0 lost"), std::string::npos) << four.output;
  // The last unit lost: unit 1 answers what it would have passed on from its own exit, and says
  // so; the samples units 0 and 1 answer anyway are unchanged.
  ::kill(pids[2], SIGKILL);
  wait_process(pids[2]);
  const auto without = client.serve(samples);
  int fell_back = 0;
  for (int64_t i = 0; i < x.size(0); ++i) {
    const int64_t decided_exit = decided.exit[i].item<int64_t>();
    const auto expected = decided_exit == 2 ? all[1][i] : decided.logits[i];
    EXPECT_EQ(without.answered_by[i], std::min<int64_t>(decided_exit, 1)) << "sample " << i;
    EXPECT_LT((without.outputs[i][0][0] - expected).abs().max().item<double>(), 1e-4) << i;
    EXPECT_EQ(without.fallback[i].empty(), decided_exit < 2) << "sample " << i;
    if (decided_exit == 2)
      EXPECT_NE(without.fallback[i].find("unit 2 (" + addresses[2] + ") is lost"),
                std::string::npos)
          << without.fallback[i];
    fell_back += decided_exit == 2;
  }
  EXPECT_GT(fell_back, 0);
  pids.erase(pids.begin() + 2);
  // The client command: a labelled set, accuracy, each unit's share.
  auto run = test::run_app("igb-serve client --address " + addresses[0] +
                           " --data synthetic --max-samples 12 --out " + (tmp / "out").string());
  for (pid_t p : pids) {
    ::kill(p, SIGKILL);
    wait_process(p);
  }
  ASSERT_EQ(run.code, 0) << run.output;
  const auto report = json::parse(std::ifstream(tmp / "out" / "client.json"));
  EXPECT_EQ(report["samples"], 12);
  double share = 0;
  for (const auto& u : report["units"]) share += u["share_pct"].get<double>();
  EXPECT_NEAR(share, 100.0, 1e-9);
}

}  // namespace
}  // namespace igb::deploy
