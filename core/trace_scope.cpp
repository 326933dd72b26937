#include "core/trace_scope.h"

#include <torch/csrc/jit/frontend/tracer.h>

namespace igb {

namespace {
thread_local std::unordered_map<const torch::nn::Module*, std::string> g_names;
}

TraceNames::TraceNames(const torch::nn::Module& root) {
  previous_.swap(g_names);
  for (const auto& item : root.named_modules("", /*include_self=*/false))
    g_names[item.value().get()] = item.key();
}

TraceNames::~TraceNames() { g_names.swap(previous_); }

TraceScope::TraceScope(const torch::nn::Module* module) {
  if (g_names.empty() || !torch::jit::tracer::isTracing()) return;
  auto it = g_names.find(module);
  if (it == g_names.end()) return;
  torch::jit::tracer::getTracingState()->graph->push_scope(it->second);
  pushed_ = true;
}

TraceScope::~TraceScope() {
  if (pushed_ && torch::jit::tracer::isTracing())
    torch::jit::tracer::getTracingState()->graph->pop_scope();
}

}  // namespace igb
