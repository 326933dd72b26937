#pragma once

#include <string>

#include "models/import/import_hook.h"

namespace igb::models::classify {

/// How an imported TorchScript model is a classifier of `family`: [N, K] outputs, K classes
/// (model arg "num_classes").
ImportHook classify_import_hook(const std::string& family);

}  // namespace igb::models::classify
