#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace igb {

/// Writes `path` atomically: `write` fills a temporary file beside it, which then replaces `path`
/// by rename. A failure (or exception in `write`) leaves any existing `path` untouched and removes
/// the temporary file.
void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path& tmp)>& write);

/// Atomically writes `text` to `path`.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

/// Reads a whole file; throws InputError naming the file when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

/// Local time formatted with strftime `fmt`.
std::string local_time_string(const char* fmt);

}  // namespace igb
