// What the files of one igb-bench run say: whether its training finished, why a program failed,
// how far training has come.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

namespace igb::options {

/// Whether the run directory holds a finished training: summary.json's epochs all have their
/// metrics.csv row (a row follows its epoch's checkpoint).
bool training_complete(const std::filesystem::path& dir);

/// The line of a failed program's log that says why: its last "error:" line, else its last line.
std::string error_line(const std::filesystem::path& log);

/// The last "==> epoch A/B" of a training log: (A + 1, B + 1), or nothing yet.
std::optional<std::pair<int64_t, int64_t>> last_epoch(const std::filesystem::path& log);

}  // namespace igb::options
