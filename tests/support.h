// Helpers shared by the test binaries.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "core/error.h"

namespace igb::test {

/// The message of the igb::InputError that `f` throws, or "(no InputError)" when it throws none.
inline std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

/// Where Debian's opencv-doc keeps its samples (data/opencv_samples.h reads IGB_OPENCV_SAMPLES
/// first; ctest points that at an empty place so that ordinary tests never score the photographs).
inline const char* kOpencvSamplesDir = "/usr/share/doc/opencv-doc/examples/data";

/// For its lifetime, points IGB_OPENCV_SAMPLES (which the library and every program a test starts
/// read) at `dir`, by default opencv-doc's own folder: tests of real data hold one.
class RealOpencvSamples {
 public:
  explicit RealOpencvSamples(const std::string& dir = kOpencvSamplesDir) {
    const char* old = ::getenv("IGB_OPENCV_SAMPLES");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("IGB_OPENCV_SAMPLES", dir.c_str(), 1);
  }
  ~RealOpencvSamples() {
    if (had_)
      ::setenv("IGB_OPENCV_SAMPLES", old_.c_str(), 1);
    else
      ::unsetenv("IGB_OPENCV_SAMPLES");
  }
  RealOpencvSamples(const RealOpencvSamples&) = delete;
  RealOpencvSamples& operator=(const RealOpencvSamples&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

/// A fresh, empty folder under the system's temporary directory, removed with everything in it
/// when the object goes out of scope (also when a test fails or throws). The name is unique
/// (mkdtemp), so tests running in parallel never share a folder.
///
///   TempDir tmp;                       // /tmp/igb_Suite_Test_Ab12Cd/
///   write_image(tmp / "a.png", img);
class TempDir {
 public:
  /// `tag` starts the folder name; by default "igb_<suite>_<test>" of the running test.
  explicit TempDir(std::string tag = default_tag()) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / (sanitize(tag) + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("cannot create a temporary folder " + pattern + ": " +
                               std::strerror(errno));
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// The folder itself.
  const std::filesystem::path& path() const { return path_; }
  /// A path inside the folder (not created).
  std::filesystem::path operator/(const std::filesystem::path& rel) const { return path_ / rel; }

 private:
  static std::string default_tag() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (info == nullptr) return "igb_test";
    return std::string("igb_") + info->test_suite_name() + "_" + info->name();
  }
  // Parameterised tests have '/' in their names.
  static std::string sanitize(std::string s) {
    for (char& c : s)
      if (c == '/' || c == '\\') c = '_';
    return s;
  }

  std::filesystem::path path_;
};

}  // namespace igb::test
