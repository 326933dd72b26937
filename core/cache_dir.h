#pragma once

#include <filesystem>
#include <string>

namespace igb {

/// The folder igb keeps what it measured on this machine in, by kind (`layer-costs`,
/// `conv-algorithms`): $IGB_CACHE_DIR/<kind>, else ~/.cache/igb/<kind>, else <tmp>/igb-<kind>.
/// Not created.
std::filesystem::path cache_dir(const std::string& kind);

}  // namespace igb
