#include "runtime/algorithm_cache.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <mutex>

#include "core/cache_dir.h"
#include "core/fs.h"
#include "core/host.h"

namespace igb::runtime {

namespace {

std::filesystem::path cache_file() {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : host_name() + " · " + cpu_name()) h = (h ^ c) * 1099511628211ULL;
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(h));
  return cache_dir("conv-algorithms") / (std::string(tag) + ".json");
}

/// How the entries were measured: 2 = blocks of runs of each kernel in turn (plan_compiler.cpp,
/// runs_faster). A file of another method is measured again and rewritten.
constexpr int kMeasure = 2;

/// The file's entries; empty when it is missing, not ours or of another method.
std::map<std::string, bool> read_cache(const std::filesystem::path& file) {
  std::map<std::string, bool> out;
  try {
    const auto j = nlohmann::json::parse(read_input_file(file));
    if (j.value("measure", 1) != kMeasure) return out;
    for (const auto& [key, value] : j.at("winograd").items())
      if (value.is_boolean()) out[key] = value.get<bool>();
  } catch (const std::exception&) {
    // Missing or damaged: measured again and rewritten.
  }
  return out;
}

}  // namespace

bool winograd_pays(const std::string& key, const std::function<bool()>& measure) {
  // The process's copy of the file: one measurement per key and process at most.
  static std::mutex mutex;
  static std::map<std::string, bool> known;
  static bool loaded = false;
  std::lock_guard<std::mutex> lock(mutex);
  const auto file = cache_file();
  if (!loaded) {
    known = read_cache(file);
    loaded = true;
  }
  if (auto it = known.find(key); it != known.end()) return it->second;
  // Another process may have measured it since this one read the file.
  for (const auto& [k, v] : read_cache(file)) known.emplace(k, v);
  if (auto it = known.find(key); it != known.end()) return it->second;
  const bool pays = measure();
  known[key] = pays;
  // What other processes stored meanwhile is kept: the file only grows.
  for (const auto& [k, v] : read_cache(file)) known.emplace(k, v);
  try {
    nlohmann::json j = {{"format", "igb convolution algorithms"},
                        {"machine", host_name() + " · " + cpu_name()},
                        {"measure", kMeasure},
                        {"winograd", known}};
    std::filesystem::create_directories(file.parent_path());
    write_text_atomically(file, j.dump(1) + "\n");
  } catch (const std::exception&) {
    // Not writable: measured again next time.
  }
  return pays;
}

}  // namespace igb::runtime
