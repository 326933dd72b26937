#include "runtime/inference_model.h"

#include <map>
#include <sstream>

#include "core/error.h"
#include "graph/summary_graph.h"
#include "runtime/plan.h"

namespace igb::runtime {

InferenceModel::InferenceModel(std::shared_ptr<torch::nn::Module> model, Forward forward,
                               std::string name, const InferenceOptions& options)
    : model_(std::move(model)),
      forward_(std::move(forward)),
      name_(std::move(name)),
      options_(options) {}

InferenceModel::~InferenceModel() = default;

std::shared_ptr<InferenceModel> InferenceModel::make(std::shared_ptr<torch::nn::Module> model,
                                                     Forward forward, const std::string& name,
                                                     const InferenceOptions& options) {
  if (!model || !forward) throw std::invalid_argument("InferenceModel::make: no model");
  return std::shared_ptr<InferenceModel>(
      new InferenceModel(std::move(model), std::move(forward), name, options));
}

Plan& InferenceModel::plan_for(const std::vector<int64_t>& shape) {
  last_used_[shape] = ++clock_;
  auto it = plans_.find(shape);
  if (it != plans_.end()) return *it->second;
  for (const auto& p : model_->parameters())
    if (!p.device().is_cpu() || p.scalar_type() != at::kFloat)
      throw InputError("the inference runtime runs float32 models on the CPU; " + name_ +
                       " holds a " + std::string(c10::toString(p.scalar_type())) +
                       " parameter on " + p.device().str());
  auto graph = graph::SummaryGraph::build(*model_, shape, forward_, name_);
  auto plan = compile_plan(graph, options_);
  while (static_cast<int>(plans_.size()) >= std::max(1, options_.max_plans)) {
    auto oldest = plans_.begin();
    for (auto p = plans_.begin(); p != plans_.end(); ++p)
      if (last_used_[p->first] < last_used_[oldest->first]) oldest = p;
    last_used_.erase(oldest->first);
    plans_.erase(oldest);
  }
  return *(plans_[shape] = std::move(plan));
}

at::Tensor InferenceModel::forward(const at::Tensor& x) {
  if (!x.defined() || x.scalar_type() != at::kFloat || !x.device().is_cpu())
    throw InputError(name_ + ": the inference runtime takes a float32 CPU tensor");
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_for(x.sizes().vec()).run(x);
}

void InferenceModel::prepare(const std::vector<int64_t>& input_shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  plan_for(input_shape);
}

std::vector<StepInfo> InferenceModel::steps(const std::vector<int64_t>& input_shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<StepInfo> out;
  for (const auto& step : plan_for(input_shape).steps) out.push_back(step->info);
  return out;
}

std::vector<double> InferenceModel::time_steps(const at::Tensor& x, int repeats) {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_for(x.sizes().vec()).time_steps(x, repeats);
}

std::string InferenceModel::int8_engine(const std::vector<int64_t>& input_shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_for(input_shape).int8_engine;
}

std::string InferenceModel::summary(const std::vector<int64_t>& input_shape) {
  const auto all = steps(input_shape);
  int native = 0, reorders = 0, views = 0, layers = 0, folded = 0, fused = 0, int8 = 0,
      reference = 0;
  std::map<std::string, int> torch_ops;
  for (const auto& s : all) {
    int8 += s.int8 ? 1 : 0;
    reference += s.implementation.rfind("ref", 0) == 0 ? 1 : 0;
    if (s.kind == "Reorder" || s.kind == "Quantize") {
      ++reorders;
    } else if (s.native && (s.kind == "Slice" || s.kind == "Pad") && s.implementation.empty()) {
      ++views;  // Int8ViewStep: igb's own copy of 8-bit values
    } else if (s.native) {
      ++native;
      if (s.ops.size() > 1 || s.kind.find('+') != std::string::npos) {
        ++layers;
        for (size_t i = 1; i < s.ops.size(); ++i)
          (s.kind.find("+BatchNorm") != std::string::npos && i == 1 ? folded : fused) += 1;
      }
    } else if (s.kind.rfind("prim::", 0) != 0) {
      ++torch_ops[s.kind];
    }
  }
  std::ostringstream out;
  int torch_count = 0;
  for (const auto& [k, n] : torch_ops) torch_count += n;
  out << all.size() << " steps: " << native << " oneDNN (" << layers
      << " with fused ops: " << folded << " BatchNorms folded, " << fused
      << " activations and adds fused";
  if (options_.int8) out << "; " << int8 << " layers in INT8, " << int8_engine(input_shape);
  if (reference) out << "; " << reference << " on oneDNN's slow reference kernels";
  out << "), " << reorders << " layout changes, ";
  if (views) out << views << " 8-bit slices and paddings, ";
  out << torch_count << " LibTorch";
  if (!torch_ops.empty()) {
    out << " (";
    bool first = true;
    for (const auto& [k, n] : torch_ops) {
      out << (first ? "" : ", ") << k << (n > 1 ? " ×" + std::to_string(n) : "");
      first = false;
    }
    out << ")";
  }
  return out.str();
}

InferenceStage::InferenceStage(const graph::SummaryGraph& graph, const std::vector<int>& ops,
                               const std::vector<int>& inputs, const std::vector<int>& outputs,
                               const InferenceOptions& options) {
  PlanRegion region;
  region.ops = ops;
  region.inputs = inputs;
  region.outputs = outputs;
  plan_ = compile_plan(graph, options, region);
}

InferenceStage::~InferenceStage() = default;

bool InferenceStage::run(std::map<int, at::Tensor>& values) {
  torch::NoGradGuard no_grad;
  std::lock_guard<std::mutex> lock(mutex_);
  return plan_->run_values(values);
}

std::vector<StepInfo> InferenceStage::steps() const {
  std::vector<StepInfo> out;
  for (const auto& step : plan_->steps) out.push_back(step->info);
  return out;
}

}  // namespace igb::runtime
