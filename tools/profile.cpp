#include "tools/profile.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/train_mode_guard.h"
#include "runtime/inference_model.h"

namespace igb::tools {

namespace jit = torch::jit;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

const std::string kLayerPrefix = "layer: ";

/// Executes a traced graph node by node. `on_op(op index, node, stack of inputs)` may replace the
/// plain call (to time it); values of every node stay in `env`.
class GraphRunner {
 public:
  explicit GraphRunner(const graph::SummaryGraph& g) : g_(g) {
    for (size_t i = 0; i < g.ops().size(); ++i)
      op_of_[g.jit_node(static_cast<int>(i))] = static_cast<int>(i);
  }

  using Hook = std::function<void(int op, jit::Node* node, jit::Stack& stack)>;

  at::Tensor run(const at::Tensor& input, const Hook& hook = {}) {
    env_.clear();
    const auto& graph = *g_.jit_graph();
    env_[graph.inputs()[0]] = input;
    for (jit::Node* node : g_.jit_graph()->nodes()) {
      if (node->kind() == c10::prim::Constant) {
        env_[node->output()] = *jit::toIValue(node->output());
        continue;
      }
      jit::Stack stack;
      for (const auto* in : node->inputs()) stack.push_back(env_.at(in));
      auto it = op_of_.find(node);
      if (hook && it != op_of_.end())
        hook(it->second, node, stack);
      else
        graph::run_traced_node(node, stack);
      for (size_t i = 0; i < node->outputs().size(); ++i) env_[node->outputs()[i]] = stack.at(i);
    }
    const auto& out = env_.at(graph.outputs()[0]);
    if (out.isTensor()) return out.toTensor();
    if (out.isTuple()) return out.toTupleRef().elements().at(0).toTensor();
    throw std::runtime_error("profile: the traced graph does not return a tensor");
  }

  /// The values `node` read in the last run.
  jit::Stack inputs_of(jit::Node* node) const {
    jit::Stack stack;
    for (const auto* in : node->inputs()) stack.push_back(env_.at(in));
    return stack;
  }

 private:
  const graph::SummaryGraph& g_;
  std::unordered_map<const jit::Node*, int> op_of_;
  std::unordered_map<const jit::Value*, c10::IValue> env_;
};

/// Gradients of the model's parameters, put back after profiling.
class GradStash {
 public:
  explicit GradStash(torch::nn::Module& model) {
    for (auto& p : model.parameters()) {
      saved_.emplace_back(p, p.grad().defined() ? p.grad().clone() : torch::Tensor());
    }
  }
  ~GradStash() {
    for (auto& [p, g] : saved_) p.mutable_grad() = g;
  }

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved_;
};

/// The op alone, forward then backward, with leaves requiring grad in place of its tensor
/// inputs and parameters.
double time_forward_backward(jit::Node* node, const jit::Stack& recorded,
                             const std::set<const c10::StorageImpl*>& buffers) {
  std::vector<at::Tensor> leaves;
  jit::Stack stack;
  const bool inplace = std::string(node->kind().toUnqualString()).back() == '_';
  for (const auto& v : recorded) {
    // Buffers (BatchNorm running statistics) stay constants, as in training.
    if (v.isTensor() && v.toTensor().has_storage() &&
        buffers.count(v.toTensor().storage().unsafeGetStorageImpl())) {
      stack.push_back(v);
    } else if (v.isTensor() && v.toTensor().is_floating_point()) {
      auto leaf = v.toTensor().detach().clone().requires_grad_(true);
      leaves.push_back(leaf);
      stack.push_back(inplace ? leaf.clone() : leaf);
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const auto& item : v.toTensorList()) {
        const at::Tensor t = item;
        auto leaf = t.detach().clone().requires_grad_(t.is_floating_point());
        leaves.push_back(leaf);
        list.push_back(leaf);
      }
      stack.push_back(list);
    } else {
      stack.push_back(v);
    }
  }
  torch::AutoGradMode grad(true);
  const auto t0 = Clock::now();
  graph::run_traced_node(node, stack);
  std::vector<at::Tensor> outs, grads;
  for (const auto& v : stack)
    if (v.isTensor() && v.toTensor().requires_grad()) {
      outs.push_back(v.toTensor());
      grads.push_back(torch::ones_like(v.toTensor()));
    }
  if (!outs.empty()) torch::autograd::backward(outs, grads);
  return ms_since(t0);
}

/// Self and total time per operator name from the profiler's push/pop events; layer spans go
/// to the trace only. Appends Chrome trace events for process `pid`.
std::vector<OperatorStat> aggregate(const torch::autograd::profiler::thread_event_lists& lists,
                                    int64_t pid, nlohmann::json& trace, double& self_total_us) {
  std::map<std::string, OperatorStat> stats;
  double origin = -1;
  for (const auto& events : lists)
    for (const auto& e : events)
      if (e.kindStr() == "push" && (origin < 0 || e.cpuUs() < origin)) origin = e.cpuUs();
  for (const auto& events : lists) {
    struct Open {
      const torch::autograd::profiler::LegacyEvent* push;
      double children_us;
    };
    std::vector<Open> stack;
    for (const auto& e : events) {
      const std::string kind = e.kindStr();
      if (kind == "push") {
        stack.push_back({&e, 0});
      } else if (kind == "pop" && !stack.empty()) {
        auto open = stack.back();
        stack.pop_back();
        const double total = open.push->cpuElapsedUs(e);
        const std::string name = open.push->name();
        const bool layer = name.rfind(kLayerPrefix, 0) == 0;
        trace.push_back({{"name", layer ? name.substr(kLayerPrefix.size()) : name},
                         {"cat", layer ? "layer" : "operator"},
                         {"ph", "X"},
                         {"ts", open.push->cpuUs() - origin},
                         {"dur", total},
                         {"pid", pid},
                         {"tid", static_cast<int64_t>(open.push->threadId())}});
        // A layer span is bookkeeping: its operators count as top-level work.
        if (!stack.empty() && !layer) stack.back().children_us += total;
        if (layer) {
          if (!stack.empty()) stack.back().children_us += open.children_us;
          continue;
        }
        auto& s = stats[name];
        s.name = name;
        s.calls += 1;
        s.total_us += total;
        s.self_us += total - open.children_us;
      }
    }
  }
  std::vector<OperatorStat> out;
  self_total_us = 0;
  for (auto& [name, s] : stats) {
    self_total_us += s.self_us;
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.self_us > b.self_us; });
  return out;
}

void check_options(const ProfileOptions& options) {
  if (options.batch_sizes.empty()) throw InputError("profile: no batch sizes given");
  for (auto b : options.batch_sizes)
    if (b <= 0) throw InputError("profile: batch size " + std::to_string(b) + " must be positive");
}

/// The input of one batch size: uniform noise from a generator of its own (seed 0), so every
/// profile sees the same input and the caller's random stream is left alone.
at::Tensor profile_input(torch::nn::Module& model, const graph::Shape& shape) {
  auto params = model.parameters();
  torch::TensorOptions opts;
  if (!params.empty()) opts = opts.device(params.front().device()).dtype(params.front().dtype());
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(0);
  return torch::rand(shape, gen, opts.device(torch::kCPU)).to(opts.device());
}

/// How many runs to make and how many of them to time.
struct Runs {
  int warmup, repeats;
  /// Median of the timed runs of `run` (which returns its own duration in ms).
  double median_of(const std::function<double()>& run) const {
    std::vector<double> times;
    for (int r = 0; r < warmup + repeats; ++r) {
      const double t = run();
      if (r >= warmup) times.push_back(t);
    }
    return median(std::move(times));
  }
};

/// One row per op of the graph, with its forward latency alone (no grad) measured op by op, and
/// the whole model's forward latency.
void time_forward(const graph::SummaryGraph& graph, GraphRunner& runner,
                  const graph::SummaryGraph::Forward& forward, const at::Tensor& input,
                  const Runs& runs, BatchProfile& bp) {
  torch::NoGradGuard no_grad;
  const size_t n = graph.ops().size();
  std::vector<std::vector<double>> fwd(n);
  // Op by op first: it also warms up every kernel the whole-model runs use.
  for (int r = 0; r < runs.warmup + runs.repeats; ++r)
    runner.run(input, [&](int op, jit::Node* node, jit::Stack& stack) {
      const auto t0 = Clock::now();
      graph::run_traced_node(node, stack);
      if (r >= runs.warmup) fwd[op].push_back(ms_since(t0));
    });
  bp.forward_ms = runs.median_of([&] {
    const auto t0 = Clock::now();
    forward(input);
    return ms_since(t0);
  });
  for (size_t i = 0; i < n; ++i) {
    const auto& op = graph.op(static_cast<int>(i));
    LayerCost c;
    c.name = op.name;
    c.type = op.type;
    if (!op.outputs.empty()) c.output = graph.shape(op.outputs[0]);
    c.forward_ms = median(fwd[i]);
    bp.layers.push_back(std::move(c));
  }
}

/// The forward latencies of the model's inference form: each step's median time given to the
/// op it is named after, a step named after no op (the input's layout change) to the next one's.
void time_inference_form(const graph::SummaryGraph& graph, torch::nn::Module& model,
                         const graph::SummaryGraph::Forward& forward, const at::Tensor& input,
                         const Runs& runs, bool int8, BatchProfile& bp) {
  // The form lives only here: a handle that does not own the caller's model.
  std::shared_ptr<torch::nn::Module> handle(std::shared_ptr<torch::nn::Module>(), &model);
  runtime::InferenceOptions o;
  o.int8 = int8;
  auto form = runtime::InferenceModel::make(handle, forward, graph.model_name(), o);
  const auto steps = form->steps(input.sizes().vec());
  const auto times = form->time_steps(input, runs.warmup + runs.repeats);
  double carried = 0;
  for (size_t k = 0; k < steps.size(); ++k) {
    const int op = graph.find(steps[k].name);
    if (op < 0) {
      carried += times[k];
      continue;
    }
    bp.layers[op].forward_ms += times[k] + carried;
    carried = 0;
  }
  bp.forward_ms = runs.median_of([&] {
    const auto t0 = Clock::now();
    form->forward(input);
    return ms_since(t0);
  });
}

/// The whole model's forward + backward of sum(output).
double time_model_forward_backward(const graph::SummaryGraph::Forward& forward,
                                   const at::Tensor& input, const Runs& runs) {
  return runs.median_of([&] {
    const auto t0 = Clock::now();
    auto out = forward(input);
    out.sum().backward();
    return ms_since(t0);
  });
}

/// Output bytes of each op from the real tensors.
void measure_output_bytes(GraphRunner& runner, const at::Tensor& input, BatchProfile& bp) {
  torch::NoGradGuard no_grad;
  runner.run(input, [&](int op, jit::Node* node, jit::Stack& stack) {
    graph::run_traced_node(node, stack);
    for (const auto& v : stack)
      if (v.isTensor()) bp.layers[op].output_bytes += static_cast<int64_t>(v.toTensor().nbytes());
  });
}

/// Each op alone, forward + backward, on the inputs it read in the runner's last run.
void time_layers_forward_backward(torch::nn::Module& model, const graph::SummaryGraph& graph,
                                  const GraphRunner& runner, const Runs& runs, BatchProfile& bp) {
  std::set<const c10::StorageImpl*> buffers;
  for (const auto& b : model.buffers())
    if (b.defined() && b.has_storage()) buffers.insert(b.storage().unsafeGetStorageImpl());
  for (size_t i = 0; i < graph.ops().size(); ++i) {
    auto* node = graph.jit_node(static_cast<int>(i));
    const auto recorded = runner.inputs_of(node);
    bp.layers[i].forward_backward_ms =
        runs.median_of([&] { return time_forward_backward(node, recorded, buffers); });
  }
}

/// One forward (op by op, inside layer spans) and backward under LibTorch's profiler: the
/// operators table, and the trace events of process `bp.batch`.
void profile_operators(const graph::SummaryGraph& graph, GraphRunner& runner,
                       const at::Tensor& input, const std::string& model_name, BatchProfile& bp,
                       nlohmann::json& trace) {
  using namespace torch::autograd::profiler;
  enableProfilerLegacy(
      torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU));
  thread_event_lists events;
  try {
    auto out = runner.run(input, [&](int op, jit::Node* node, jit::Stack& stack) {
      RECORD_USER_SCOPE(kLayerPrefix + graph.op(op).name);
      graph::run_traced_node(node, stack);
    });
    if (out.requires_grad()) out.sum().backward();
  } catch (...) {
    disableProfilerLegacy();
    throw;
  }
  events = disableProfilerLegacy();
  bp.operators = aggregate(events, bp.batch, trace, bp.profiled_self_us);
  trace.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", bp.batch},
                   {"args", {{"name", model_name + " batch " + std::to_string(bp.batch)}}}});
}

/// Everything measured at one batch size. The model is in eval mode.
BatchProfile profile_batch(torch::nn::Module& model, const graph::Shape& input_shape, int64_t batch,
                           const graph::SummaryGraph::Forward& forward,
                           const std::string& model_name, const Runs& runs, bool inference,
                           bool int8, nlohmann::json& trace) {
  graph::Shape shape = input_shape;
  shape[0] = batch;
  auto graph = graph::SummaryGraph::build(model, shape, forward, model_name);
  const auto input = profile_input(model, shape);
  BatchProfile bp;
  bp.batch = batch;
  GraphRunner runner(graph);
  time_forward(graph, runner, forward, input, runs, bp);
  if (inference) {
    for (auto& layer : bp.layers) layer.forward_ms = 0;
    time_inference_form(graph, model, forward, input, runs, int8, bp);
  }
  bp.forward_backward_ms = time_model_forward_backward(forward, input, runs);
  measure_output_bytes(runner, input, bp);
  time_layers_forward_backward(model, graph, runner, runs, bp);
  profile_operators(graph, runner, input, model_name, bp, trace);
  return bp;
}

}  // namespace

ModelProfile profile_model(torch::nn::Module& model, const graph::Shape& input_shape,
                           const graph::SummaryGraph::Forward& forward,
                           const std::string& model_name, const ProfileOptions& options,
                           const std::function<void(const std::string&)>& progress) {
  check_options(options);
  ModelProfile result;
  result.model = model_name;
  result.input = input_shape;
  result.input[0] = 1;
  result.threads = at::get_num_threads();
  result.runtime = !options.inference ? "eager"
                   : options.int8     ? "INT8 inference form"
                                      : "inference form";
  result.chrome_trace = {{"traceEvents", nlohmann::json::array()}, {"displayTimeUnit", "ms"}};

  GradStash grads(model);
  TrainModeGuard eval(model, /*train=*/false);
  const Runs runs{std::max(0, options.warmup), std::max(1, options.repeats)};
  for (int64_t batch : options.batch_sizes) {
    if (progress) progress("profiling " + model_name + " at batch " + std::to_string(batch));
    result.batches.push_back(profile_batch(model, input_shape, batch, forward, model_name, runs,
                                           options.inference, options.int8,
                                           result.chrome_trace["traceEvents"]));
  }
  return result;
}

std::vector<Report> profile_reports(const ModelProfile& p, int top) {
  std::vector<Report> out;
  for (const auto& b : p.batches) {
    Report layers;
    layers.title = "Per-layer latency of " + p.model + ", batch " + std::to_string(b.batch) + " (" +
                   std::to_string(p.threads) + " threads, median)";
    layers.table.columns = {"Name",         "Type",         "Output",     "Output bytes",
                            "Forward (ms)", "Fwd+Bwd (ms)", "Forward (%)"};
    double sum = 0;
    for (const auto& l : b.layers) sum += l.forward_ms;
    for (const auto& l : b.layers)
      layers.table.rows.push_back({l.name, l.type, graph::shape_to_string(l.output),
                                   std::to_string(l.output_bytes), fixed(l.forward_ms, 3),
                                   fixed(l.forward_backward_ms, 3),
                                   fixed(sum > 0 ? 100.0 * l.forward_ms / sum : 0, 1)});
    layers.footer = {"Model forward (" + p.runtime + ") " + fixed(b.forward_ms, 3) +
                     " ms (layers one by one: " + fixed(sum, 3) + " ms); forward + backward " +
                     fixed(b.forward_backward_ms, 3) + " ms"};
    out.push_back(std::move(layers));

    Report ops;
    ops.title = "Top operators of " + p.model + ", batch " + std::to_string(b.batch) +
                " (one profiled forward + backward)";
    ops.table.columns = {"Name",           "Self CPU %",   "Self CPU (us)", "CPU total %",
                         "CPU total (us)", "CPU avg (us)", "# of Calls"};
    const double all = b.profiled_self_us;
    for (int i = 0; i < top && i < static_cast<int>(b.operators.size()); ++i) {
      const auto& s = b.operators[i];
      ops.table.rows.push_back(
          {s.name, fixed(all > 0 ? 100.0 * s.self_us / all : 0, 2), fixed(s.self_us, 1),
           fixed(all > 0 ? 100.0 * s.total_us / all : 0, 2), fixed(s.total_us, 1),
           fixed(s.total_us / static_cast<double>(s.calls), 1), std::to_string(s.calls)});
    }
    ops.footer = {"Self CPU time total: " + fixed(all / 1000.0, 3) + " ms"};
    out.push_back(std::move(ops));
  }
  return out;
}

nlohmann::json profile_json(const ModelProfile& p) {
  nlohmann::json batches = nlohmann::json::array();
  for (const auto& b : p.batches) {
    nlohmann::json layers = nlohmann::json::array(), ops = nlohmann::json::array();
    for (const auto& l : b.layers)
      layers.push_back({{"name", l.name},
                        {"type", l.type},
                        {"output", l.output},
                        {"output_bytes", l.output_bytes},
                        {"forward_ms", l.forward_ms},
                        {"forward_backward_ms", l.forward_backward_ms}});
    for (const auto& s : b.operators)
      ops.push_back(
          {{"name", s.name},
           {"calls", s.calls},
           {"self_us", s.self_us},
           {"total_us", s.total_us},
           {"self_pct", b.profiled_self_us > 0 ? 100.0 * s.self_us / b.profiled_self_us : 0.0}});
    batches.push_back({{"batch", b.batch},
                       {"forward_ms", b.forward_ms},
                       {"forward_backward_ms", b.forward_backward_ms},
                       {"layers", layers},
                       {"operators", ops}});
  }
  return {{"model", p.model},
          {"input", p.input},
          {"threads", p.threads},
          {"runtime", p.runtime},
          {"batches", batches}};
}

}  // namespace igb::tools
