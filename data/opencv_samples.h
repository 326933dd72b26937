#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace igb::data {

/// Real material from Debian's `opencv-doc` package: the photographs, the handwritten-digit sheet
/// and the videos of OpenCV's samples, read as data (not fixtures).

/// The Debian package that ships the samples.
inline constexpr const char* kOpencvSamplesPackage = "opencv-doc";

/// Where the samples are: $IGB_OPENCV_SAMPLES when set, else
/// /usr/share/doc/opencv-doc/examples/data.
std::filesystem::path opencv_samples_dir();

/// The sample file `name` ("digits.png", "vtest.avi"). When it is missing, InputError in one line
/// naming `what` needs it, the file and the package ("--data photos: /usr/share/doc/opencv-doc/
/// examples/data/baboon.jpg is missing: install Debian's opencv-doc package (apt-get install
/// opencv-doc)").
std::filesystem::path opencv_sample(const std::string& name, const std::string& what);

/// Why the sample `name` cannot be read here, in one line naming the file and the package; ""
/// when it is there.
std::string opencv_sample_unavailable(const std::string& name);

/// Why the photographs cannot be read here, in one line ("/usr/share/doc/opencv-doc/examples/
/// data/baboon.jpg is missing: install Debian's opencv-doc package (apt-get install
/// opencv-doc)"); "" when every one of them is there.
std::string photos_unavailable();

/// The photographs SR and deblurring train on with `--data photos`: twenty pictures of scenes,
/// objects and textures (stereo and view pairs kept together), none of them held out.
const std::vector<std::string>& training_photos();

/// The ten held-out photographs that `--data photos` validates and tests on and that training
/// never sees: baboon, building, butterfly, chicky_512, fruits, HappyFish, home, messi5,
/// smarties, squirrel_cls.
const std::vector<std::string>& held_out_photos();

/// Reads the photographs `names` (RGB [3, H, W] in [0, 1]); `what` names the option for the
/// missing-package message.
std::vector<at::Tensor> read_photos(const std::vector<std::string>& names, const std::string& what,
                                    int64_t max_pixels);

}  // namespace igb::data
