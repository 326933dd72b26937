#include "runtime/algorithm_cache.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

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

/// How the entries were measured: 2 = blocks of runs of each kernel in turn (runs_faster()). A
/// file of another method is measured again and rewritten.
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

/// A convolution primitive on zeroed buffers of its own layouts, for timing.
class ConvolutionRunner {
 public:
  explicit ConvolutionRunner(const dnnl::convolution_forward::primitive_desc& pd)
      : engine_(pd.get_engine()), stream_(engine_), conv_(pd) {
    for (const auto& [arg, desc] : {std::make_pair(DNNL_ARG_SRC, pd.src_desc()),
                                    std::make_pair(DNNL_ARG_WEIGHTS, pd.weights_desc()),
                                    std::make_pair(DNNL_ARG_BIAS, pd.bias_desc()),
                                    std::make_pair(DNNL_ARG_DST, pd.dst_desc()),
                                    std::make_pair(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc())}) {
      if (desc.get_size() == 0) continue;
      dnnl::memory m(desc, engine_);
      std::memset(m.get_data_handle(), 0, desc.get_size());
      args_[arg] = m;
    }
  }
  /// Milliseconds per run over a block of `n` runs.
  double block(int n) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) conv_.execute(stream_, args_);
    stream_.wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
               .count() /
           n;
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::convolution_forward conv_;
  std::unordered_map<int, dnnl::memory> args_;
};

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

/// Whether convolution `a` runs faster than `b`: five rounds of a block of runs of each in turn
/// (a block lasts about a quarter of a millisecond), the fastest block of each compared. Tens of
/// microseconds per run, so a handful of single runs would decide by noise.
bool runs_faster(const dnnl::convolution_forward::primitive_desc& a,
                 const dnnl::convolution_forward::primitive_desc& b) {
  ConvolutionRunner ra(a), rb(b);
  ra.block(1);
  rb.block(1);  // first runs: caches, page faults
  const double once = std::max(1e-4, std::min(ra.block(1), rb.block(1)));
  const int n = static_cast<int>(std::clamp(0.25 / once, 1.0, 200.0));
  double best_a = std::numeric_limits<double>::infinity(), best_b = best_a;
  for (int r = 0; r < 5; ++r) {
    best_a = std::min(best_a, ra.block(n));
    best_b = std::min(best_b, rb.block(n));
  }
  return best_a < best_b;
}

}  // namespace igb::runtime
