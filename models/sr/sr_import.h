#pragma once

#include <string>

#include "models/import/import_hook.h"

namespace igb::models::sr {

/// How an imported TorchScript model is a super-resolution model of `family`: an output of the
/// input's channels, 2-4 times its height and width (model arg "scale": the factor); it is
/// traced on 32x32 inputs, as SR models are.
ImportHook sr_import_hook(const std::string& family);

}  // namespace igb::models::sr
