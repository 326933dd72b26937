#pragma once

#include "models/family.h"

namespace igb::models::deblur {

/// The descriptor of the family, for register_builtin_families().
Family deblur_family();

}  // namespace igb::models::deblur
