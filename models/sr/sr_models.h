#pragma once

#include "models/model.h"

namespace igb::models::sr {

/// Adds srcnn, fsrcnn, espcn and vdsr to `registry`, filed under `family`.
void register_sr_models(Registry<ModelSpec>& registry, const std::string& family);

}  // namespace igb::models::sr
