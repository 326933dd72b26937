#pragma once

#include "models/model.h"

namespace igb::models::sr {

/// Adds srcnn, fsrcnn, espcn and vdsr to `registry`.
void register_sr_models(Registry<ModelSpec>& registry);

}  // namespace igb::models::sr
