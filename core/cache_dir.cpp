#include "core/cache_dir.h"

#include <cstdlib>

namespace igb {

std::filesystem::path cache_dir(const std::string& kind) {
  if (const char* d = std::getenv("IGB_CACHE_DIR"); d && *d) return std::filesystem::path(d) / kind;
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "igb" / kind;
  return std::filesystem::temp_directory_path() / ("igb-" + kind);
}

}  // namespace igb
