#pragma once

#include "models/family.h"

namespace igb::models::sr {

/// The descriptor of the family, for register_builtin_families().
Family sr_family();

}  // namespace igb::models::sr
