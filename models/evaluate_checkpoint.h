#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include <nlohmann/json.hpp>

#include "compress/post_train_quantizer.h"
#include "core/run_context.h"
#include "models/evaluation.h"
#include "models/external_forward.h"
#include "models/model.h"

namespace igb::models {

/// What igb-test asks of a checkpoint, whatever its family.
struct TestRequest {
  std::string checkpoint;
  /// The data to score on (its run_config is filled from the checkpoint).
  EvalData data;
  /// Folder for test_summary.json (and quantization statistics); empty = the checkpoint's folder.
  std::string out;
  /// Folder for restored images (PNG); empty = none.
  std::string save_images;
  /// Score each image as the mean of the model's outputs on its eight flips and transposes
  /// (geometric_self_ensemble, EDSR's "+"); not with quantize_eval or external.
  bool self_ensemble = false;
  /// --quantize-eval: also the post-training quantized model, calibrated on the same data.
  compress::QuantizeEvalRequest quantize_eval;
  /// --onnx: also an exported model in another runtime, on the same data.
  ExternalForward external;
  /// --also-eval: the report sets scored besides `data` (report_set_names); empty: the installed
  /// ones.
  std::vector<std::string> also_eval;
  /// How the checkpoint's model runs when scored: given the model (eval mode, on its device),
  /// the forward pass to score and what it is called ("inference form"); empty: the model's own
  /// eager forward. igb-test passes the inference form unless --runtime eager.
  std::function<Forward(const Model&, std::string& label)> inference;
  /// --int8: also the model with its quantized layers run in integers, next to the
  /// fake-quantized model (the checkpoint's own, or the post-training quantized one with
  /// quantize_eval). Given the model and its fake-quantized forward pass, the integer forward
  /// pass and a line saying what runs in integers; it throws InputError when nothing does.
  std::function<Forward(const Model&, const Forward& fake_quantized, std::string& what)> int8;
};

/// Tests a checkpoint of `family`: rebuilds its model, scores it with the evaluator `make`
/// builds (and, as asked, its self-ensemble, its post-training quantized form and an external
/// runtime's export, on the same data), prints the tables, writes test_summary.json and returns
/// it.
nlohmann::json evaluate_checkpoint(const std::string& family, const TestRequest& request,
                                   const EvaluatorFactory& make, RunContext& ctx);

}  // namespace igb::models
