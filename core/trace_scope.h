#pragma once

#include <torch/nn/module.h>

#include <string>
#include <unordered_map>

namespace igb {

/// Names the modules of a model for the duration of a trace, so that ops recorded while a named
/// module runs carry that module's dotted path as their scope. Parametric ops are tied to their
/// module through their parameters; this is how parameter-free ones (activations, pooling inside
/// a Sequential, the add of a residual block) learn where they come from.
///
///   TraceNames names(*model);           // before torch::jit::tracer::trace
///   ... trace; node->scope() names "layer1.0.relu1" ...
class TraceNames {
 public:
  explicit TraceNames(const torch::nn::Module& root);
  ~TraceNames();
  TraceNames(const TraceNames&) = delete;
  TraceNames& operator=(const TraceNames&) = delete;

 private:
  std::unordered_map<const torch::nn::Module*, std::string> previous_;
};

/// Pushes `module`'s traced scope while it lives, when a trace is being recorded and the module
/// was named by a live TraceNames; otherwise does nothing (one thread-local read).
class TraceScope {
 public:
  explicit TraceScope(const torch::nn::Module* module);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace igb
