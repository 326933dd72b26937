#pragma once

#include <torch/nn/module.h>

#include "tools/report.h"

namespace igb::tools {

/// Structure sparsity of one weight tensor, as Distiller's weights_sparsity_summary reports it.
/// All fractions are percentages (0–100).
struct ParamSparsity {
  std::string name;
  std::vector<int64_t> shape;
  int64_t dense = 0;  // elements
  int64_t nnz = 0;    // non-zero elements
  /// 2-D weights ([out, in]): zero rows of the stored matrix (output neurons, Distiller's
  /// "Cols" of the transposed matrix) and zero columns (inputs, Distiller's "Rows"); 0 for 4-D.
  double cols = 0, rows = 0;
  /// 4-D weights: zero input channels (across all filters); zero kernels (2-D structures, also
  /// the rows of a 2-D weight); zero filters (3-D structures).
  double channels = 0, kernels = 0, filters = 0;
  double fine = 0;
  double std = 0, mean = 0, abs_mean = 0;
};

/// Sparsity of one tensor (any rank; structure columns are 0 where they do not apply).
ParamSparsity tensor_sparsity(const std::string& name, const torch::Tensor& t);

/// Every 2-D and 4-D parameter whose name ends in "weight", in registration order.
std::vector<ParamSparsity> model_sparsity(const torch::nn::Module& model);

/// Distiller's columns `Name, Shape, NNZ (dense), NNZ (sparse), Cols (%), Rows (%), Ch (%),
/// 2D (%), 3D (%), Fine (%), Std, Mean, Abs-Mean` with a total row; JSON
/// {"total_sparsity", "params": [{"name", "shape", "nnz", "fine", "filters", "channels", ...}]}.
Report sparsity_report(const std::vector<ParamSparsity>& params, const std::string& model);

}  // namespace igb::tools
