#pragma once

#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "deploy/early_exit/exit_network.h"
#include "deploy/onnx/onnx_export.h"

namespace igb::deploy {

/// Writes each segment of `net` (a model cut at its exits, docs/early-exit.md#segments) as
/// `segment<e>.onnx` into `dir`: the segment's layers, and for an early exit its head, whose
/// logits are the graph output `exit<e>`; the tensors later segments read are graph outputs too,
/// named as the whole model's export names them. Writes manifest.json ("igb early-exit
/// segments" v1): the criterion, and per segment the file, its inputs and forwarded outputs with
/// shapes, the exit's output, threshold (in the criterion's unit; null: never answers) and MACs to
/// leave there. `score_thresholds` one per early exit, in score units. Returns the manifest.
nlohmann::json export_exit_segments(torch::nn::Module& model, const graph::SummaryGraph& graph,
                                    const ExitNetwork& net, ExitCriterion criterion,
                                    const std::vector<double>& score_thresholds,
                                    const OnnxExportOptions& options,
                                    const std::filesystem::path& dir);

/// What a cascade unit reads of the manifest.json export_exit_segments writes.
struct SegmentsManifest {
  std::string model;
  std::vector<int64_t> input;
  ExitCriterion criterion = ExitCriterion::kMaxSoftmax;
  /// Per segment, its exit's threshold in the criterion's unit; none where the exit never answers
  /// early (the final one, and an early one calibrated never to).
  std::vector<std::optional<double>> thresholds;
};

/// Reads a segments manifest strictly (format "igb early-exit segments", version 1); InputError
/// naming the file and the key otherwise.
SegmentsManifest read_segments_manifest(const std::filesystem::path& path);

}  // namespace igb::deploy
