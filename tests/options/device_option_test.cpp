// --device: cpu, cuda or cuda:N, and one clear line for anything else or for a CUDA device this
// LibTorch build or machine does not have; the probe of a machine for a CUDA build.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "core/error.h"
#include "options/common_options.h"
#include "tests/apps/run_support.h"

namespace igb::options {
namespace {

/// The message configure_runtime refuses `device` with ("" when it takes it).
std::string refusal(const std::string& device) {
  try {
    configure_runtime(torch::get_num_threads(), device);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceOption, NamesOtherThanCpuCudaOrCudaNAreRefused) {
  EXPECT_EQ(configure_runtime(torch::get_num_threads(), "cpu"), c10::Device(c10::kCPU));
  for (const std::string bad : {"gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda0", "cuda:1.5",
                                "cuda:123456", " cuda", ""})
    EXPECT_EQ(refusal(bad), "--device must be cpu, cuda or cuda:N, not '" + bad + "'") << bad;
}

TEST(DeviceOption, CudaWithoutACudaBuildIsRefusedInOneLine) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "this LibTorch has CUDA and a GPU";
  for (const std::string cuda : {"cuda", "cuda:0", "cuda:3"})
    EXPECT_EQ(refusal(cuda),
              "--device " + cuda + ": no CUDA device is available to this LibTorch build");
}

TEST(DeviceOption, AGpuTheMachineDoesNotHaveIsRefusedInOneLine) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  const auto count = static_cast<int>(torch::cuda::device_count());
  EXPECT_EQ(configure_runtime(torch::get_num_threads(), "cuda:" + std::to_string(count - 1)),
            c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(count - 1)));
  EXPECT_NE(refusal("cuda:" + std::to_string(count)).find("CUDA device"), std::string::npos);
}

TEST(GpuProbe, SaysWhatThisMachineOffersForACudaBuild) {
  // scripts/gpu/probe.sh (docs/gpu.md) runs on any machine, GPU or not, and says "key: value".
  const auto probe = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() /
                     "scripts" / "gpu" / "probe.sh";
  ASSERT_TRUE(std::filesystem::exists(probe)) << probe;
  std::string output;
  FILE* p = popen(("bash " + probe.string() + " 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) output.append(buf.data(), n);
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  std::map<std::string, std::string> said;
  test::RunResult lines{0, output};
  for (const auto& line : lines.lines()) {
    const auto colon = line.find(": ");
    ASSERT_NE(colon, std::string::npos) << line;
    said[line.substr(0, colon)] = line.substr(colon + 2);
  }
  for (const char* key : {"gpu", "gpu_count", "python_torch", "libtorch_headers", "glibc", "c++",
                          "cmake", "dep_yaml-cpp", "dep_grpc", "dep_opencv"})
    EXPECT_TRUE(said.count(key)) << key << " missing from:\n" << output;
  // The headers the default build finds are the LibTorch this test was compiled against.
  if (said["libtorch_headers"] != "none")
    EXPECT_EQ(said["libtorch_headers"], std::to_string(TORCH_VERSION_MAJOR) + "." +
                                            std::to_string(TORCH_VERSION_MINOR) + "." +
                                            std::to_string(TORCH_VERSION_PATCH));
  // A GPU counts as one when this LibTorch sees it too (or it has no CUDA).
  if (torch::cuda::is_available()) EXPECT_NE(said["gpu"], "none");
  EXPECT_EQ(said["gpu"] == "none", said["gpu_count"] == "0");
}

}  // namespace
}  // namespace igb::options
