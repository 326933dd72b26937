#include "tools/sparsity.h"

#include "core/tensor_util.h"
#include "graph/summary_graph.h"

namespace igb::tools {

namespace {

/// Percentage of the `n` structures along `dim` (the others summed) that are all zero.
double zero_structures(const torch::Tensor& nonzero_per_structure) {
  const int64_t n = nonzero_per_structure.numel();
  if (n == 0) return 0;
  const int64_t alive = nonzero_per_structure.ne(0).sum().item<int64_t>();
  return 100.0 * static_cast<double>(n - alive) / static_cast<double>(n);
}

}  // namespace

ParamSparsity tensor_sparsity(const std::string& name, const torch::Tensor& tensor) {
  torch::NoGradGuard no_grad;
  auto t = tensor.detach().to(torch::kCPU, torch::kDouble);
  ParamSparsity s;
  s.name = name;
  s.shape = t.sizes().vec();
  s.dense = t.numel();
  s.nnz = s.dense - count_zeros(t);
  s.fine =
      s.dense ? 100.0 * static_cast<double>(s.dense - s.nnz) / static_cast<double>(s.dense) : 0;
  if (s.dense) {
    s.mean = t.mean().item<double>();
    s.abs_mean = t.abs().mean().item<double>();
    s.std = s.dense > 1 ? t.std().item<double>() : 0;
  }
  auto nz = t.ne(0).to(torch::kLong);
  if (t.dim() == 2) {
    s.cols = zero_structures(nz.sum(1));  // rows of [out, in]: output neurons
    s.rows = zero_structures(nz.sum(0));  // columns: inputs
    s.kernels = s.cols;                   // Distiller's 2-D structures of a matrix are its rows
  } else if (t.dim() == 4) {
    s.channels = zero_structures(nz.sum({0, 2, 3}));
    s.kernels = zero_structures(nz.reshape({t.size(0) * t.size(1), -1}).sum(1));
    s.filters = zero_structures(nz.reshape({t.size(0), -1}).sum(1));
  }
  return s;
}

std::vector<ParamSparsity> model_sparsity(const torch::nn::Module& model) {
  std::vector<ParamSparsity> out;
  for (const auto& p : model.named_parameters()) {
    const auto& name = p.key();
    if (p.value().dim() != 2 && p.value().dim() != 4) continue;
    if (name.size() < 6 || name.compare(name.size() - 6, 6, "weight") != 0) continue;
    out.push_back(tensor_sparsity(name, p.value()));
  }
  return out;
}

Report sparsity_report(const std::vector<ParamSparsity>& params, const std::string& model) {
  Report r;
  r.title = "Weight sparsity of " + model;
  r.table.columns = {"Name",     "Shape",  "NNZ (dense)", "NNZ (sparse)", "Cols (%)",
                     "Rows (%)", "Ch (%)", "2D (%)",      "3D (%)",       "Fine (%)",
                     "Std",      "Mean",   "Abs-Mean"};
  int64_t dense = 0, nnz = 0;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& p : params) {
    r.table.rows.push_back({p.name, graph::shape_to_string(p.shape), std::to_string(p.dense),
                            std::to_string(p.nnz), fixed(p.cols, 2), fixed(p.rows, 2),
                            fixed(p.channels, 2), fixed(p.kernels, 2), fixed(p.filters, 2),
                            fixed(p.fine, 2), fixed(p.std, 5), fixed(p.mean, 5),
                            fixed(p.abs_mean, 5)});
    dense += p.dense;
    nnz += p.nnz;
    rows.push_back({{"name", p.name},
                    {"shape", p.shape},
                    {"nnz", p.nnz},
                    {"dense", p.dense},
                    {"fine", p.fine},
                    {"filters", p.filters},
                    {"channels", p.channels},
                    {"kernels", p.kernels},
                    {"cols", p.cols},
                    {"rows", p.rows},
                    {"std", p.std},
                    {"mean", p.mean},
                    {"abs_mean", p.abs_mean}});
  }
  const double total =
      dense ? 100.0 * static_cast<double>(dense - nnz) / static_cast<double>(dense) : 0;
  r.table.rows.push_back({"Total sparsity:", "-", std::to_string(dense), std::to_string(nnz),
                          fixed(0, 2), fixed(0, 2), fixed(0, 2), fixed(0, 2), fixed(0, 2),
                          fixed(total, 2), fixed(0, 5), fixed(0, 5), fixed(0, 5)});
  r.footer = {"Total sparsity: " + fixed(total, 2) + "% (" + std::to_string(dense - nnz) + " of " +
              std::to_string(dense) + " weights are zero; percentages in every column)"};
  r.json = {{"model", model},
            {"total_sparsity", total},
            {"total_dense", dense},
            {"total_nnz", nnz},
            {"params", rows}};
  return r;
}

}  // namespace igb::tools
