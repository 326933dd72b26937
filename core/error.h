#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace igb {

/// Exit status of the drivers: 0 success, 1 internal failure, 2 usage or bad input.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitInput = 2;

/// Bad input from the user: options, files, YAML, images, checkpoints, shapes. The message is one
/// line that names the thing and where it is; drivers print it and exit with kExitInput.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& what) : std::runtime_error(what) {}
};

/// Joins `items` with ", " (for "valid choices are ..." messages).
std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

/// Edits (insert, delete or replace a character, or swap two neighbours) from `a` to `b`: "weigths"
/// is one from "weights".
size_t edit_distance(const std::string& a, const std::string& b);

/// The `n` entries of `candidates` closest to `name` by edit distance, nearest first.
std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates, size_t n = 3);

}  // namespace igb
