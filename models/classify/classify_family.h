#pragma once

#include "models/family.h"

namespace igb::models::classify {

/// The descriptor of the family, for register_builtin_families().
Family classify_family();

}  // namespace igb::models::classify
