#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "models/evaluation.h"

namespace igb::models::classify {

/// Scores classification: top-1 and top-5 accuracy (in %) and the mean cross-entropy over every
/// sample of a dataset, in batches of `batch_size` built by `workers` loader threads, in the
/// dataset's order; no baseline and no per-sample rows.
class ClassifyEvaluator : public Evaluator {
 public:
  ClassifyEvaluator(std::shared_ptr<const data::Dataset> dataset, int64_t batch_size,
                    int64_t workers, c10::Device device, std::string description,
                    nlohmann::json summary = nlohmann::json::object());

  /// The family's metrics and baseline, as every evaluation of it reports them.
  static EvalLayout base_layout();

  std::string description() const override { return description_; }
  Evaluation evaluate(const Forward& forward, const std::string& save_dir = {}) const override;
  void for_each_input(int64_t batches,
                      const std::function<void(const at::Tensor&)>& f) const override;
  const EvalLayout& layout() const override { return layout_; }
  nlohmann::json summary_fields() const override { return summary_; }

  /// Calls `f` on each batch (inputs and labels, on the loader's device) in order until it
  /// returns false.
  void for_each_batch(const std::function<bool(const data::Example&)>& f) const;
  const c10::Device& device() const { return device_; }

 private:
  std::shared_ptr<const data::Dataset> dataset_;
  int64_t batch_size_, workers_;
  c10::Device device_;
  std::string description_;
  nlohmann::json summary_;
  EvalLayout layout_;
};

/// The evaluator of a classifier on the validation split of `data` (data.options: {"dataset":
/// "auto" | "cifar10" | "mnist" | "imagefolder" | "synthetic"}), at the model's input shape, in
/// batches of 128. With data.batches set, the first data.batches batches are loaded into memory
/// once (the sensitivity sweep evaluates them many times).
std::unique_ptr<Evaluator> make_classify_evaluator(ModelImpl& model, const EvalData& data,
                                                   const c10::Device& device);

}  // namespace igb::models::classify
