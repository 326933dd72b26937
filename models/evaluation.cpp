#include "models/evaluation.h"

#include <algorithm>

#include "core/train_mode_guard.h"

namespace igb::models {

Metrics mean_of_items(const std::vector<Evaluation::Item>& items, bool baseline) {
  Metrics out;
  if (items.empty()) return out;
  const double n = static_cast<double>(items.size());
  for (const auto& [key, value] : baseline ? items[0].baseline : items[0].metrics)
    out.emplace_back(key, 0.0);
  // Each item adds its share, in item order (the means the published figures were printed from).
  for (const auto& item : items) {
    const auto& m = baseline ? item.baseline : item.metrics;
    for (size_t k = 0; k < out.size() && k < m.size(); ++k) out[k].second += m[k].second / n;
  }
  return out;
}

Evaluation evaluate_model(const Evaluator& evaluator, ModelImpl& model,
                          const std::string& save_dir) {
  torch::NoGradGuard no_grad;
  TrainModeGuard eval(model, /*train=*/false);
  return evaluator.evaluate([&model](const at::Tensor& x) { return model.forward(x); }, save_dir);
}

Metrics validation_metrics(const Evaluation& ev, const EvalLayout& layout,
                           const std::vector<std::string>& skip) {
  const auto kept = [&](const std::string& key) {
    return std::find(skip.begin(), skip.end(), key) == skip.end();
  };
  Metrics out;
  for (const auto& [key, value] : ev.metrics)
    if (kept(key)) out.emplace_back(key, value);
  for (const auto& [key, value] : ev.baseline)
    if (kept(baseline_key(layout, key))) out.emplace_back(baseline_key(layout, key), value);
  return out;
}

}  // namespace igb::models
