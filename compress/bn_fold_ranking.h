#pragma once

#include <map>
#include <string>

#include "compress/model_params.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace igb::graph {
class SummaryGraph;
}  // namespace igb::graph

/// Distiller's `fold_batchnorm` pruning-policy argument (distiller/policy.py, PruningPolicy): the
/// pruner ranks and masks a Conv2d's weight as its BatchNorm would scale it in inference,
/// w·γ/√(running_var + ε) per filter, so a filter of small weights but a large γ survives; the
/// mask applies to the unfolded weight, and every other parameter is ranked as it is.
namespace igb::compress {

/// The Conv2d weights of `model` whose output feeds one BatchNorm2d and nothing else in `graph`
/// (Distiller: the BatchNormalization successor of a Conv2d module; Linear and transposed
/// convolutions are not folded), as weight name → BatchNorm module name.
std::map<std::string, std::string> conv_batchnorm_pairs(torch::nn::Module& model,
                                                        const graph::SummaryGraph& graph);

/// `params` with each weight of `pairs` replaced by its BN-folded copy, from the BatchNorm's
/// current γ and running variance (affine=false: γ = 1). The model is not changed.
ModelParams bn_folded_params(const ModelParams& params,
                             const std::map<std::string, std::string>& pairs);

}  // namespace igb::compress
