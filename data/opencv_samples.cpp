#include "data/opencv_samples.h"

#include <cstdlib>
#include <system_error>

#include "core/error.h"
#include "data/image.h"

namespace igb::data {

namespace fs = std::filesystem;

fs::path opencv_samples_dir() {
  const char* env = std::getenv("IGB_OPENCV_SAMPLES");
  if (env != nullptr && *env != '\0') return env;
  return "/usr/share/doc/opencv-doc/examples/data";
}

std::string opencv_sample_unavailable(const std::string& name) {
  const fs::path path = opencv_samples_dir() / name;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return {};
  return path.string() + " is missing: install Debian's " + kOpencvSamplesPackage +
         " package (apt-get install " + kOpencvSamplesPackage + ")";
}

fs::path opencv_sample(const std::string& name, const std::string& what) {
  const std::string missing = opencv_sample_unavailable(name);
  if (!missing.empty()) throw InputError(what + ": " + missing);
  return opencv_samples_dir() / name;
}

std::string photos_unavailable() {
  for (const auto* list : {&training_photos(), &held_out_photos()})
    for (const auto& name : *list) {
      std::string missing = opencv_sample_unavailable(name);
      if (!missing.empty()) return missing;
    }
  return {};
}

// The split is by picture, and pictures of one scene (stereo pairs, two views, an edited copy)
// sit on the same side, so no held-out photograph has a near-copy in training.
const std::vector<std::string>& training_photos() {
  static const std::vector<std::string> names = {
      "aero1.jpg", "aero3.jpg",        "aloeL.jpg",        "aloeR.jpg",        "apple.jpg",
      "board.jpg", "ela_modified.jpg", "ela_original.jpg", "graf1.png",        "graf3.png",
      "left.jpg",  "leuvenA.jpg",      "leuvenB.jpg",      "orange.jpg",       "pca_test1.jpg",
      "right.jpg", "rubberwhale1.png", "rubberwhale2.png", "starry_night.jpg", "stuff.jpg"};
  return names;
}

const std::vector<std::string>& held_out_photos() {
  static const std::vector<std::string> names = {
      "baboon.jpg",    "building.jpg", "butterfly.jpg", "chicky_512.png", "fruits.jpg",
      "HappyFish.jpg", "home.jpg",     "messi5.jpg",    "smarties.png",   "squirrel_cls.jpg"};
  return names;
}

std::vector<at::Tensor> read_photos(const std::vector<std::string>& names, const std::string& what,
                                    int64_t max_pixels) {
  std::vector<at::Tensor> out;
  out.reserve(names.size());
  for (const auto& name : names) out.push_back(read_image(opencv_sample(name, what), max_pixels));
  return out;
}

}  // namespace igb::data
