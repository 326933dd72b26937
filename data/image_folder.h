#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace igb::data {

/// All image files (png, jpg, jpeg, bmp) under `dir`, recursively (following symlinks), sorted by
/// path. Throws InputError when `dir` does not exist or is not a directory, when an entry cannot be
/// read, and naming the entry when a symlink leads back to a folder it is in (a loop).
std::vector<std::filesystem::path> list_images(const std::filesystem::path& dir);

/// The names of the folders directly in `dir` (following symlinks), sorted. Throws InputError
/// naming the entry on a symlink loop or an entry that cannot be read.
std::vector<std::string> list_subfolders(const std::filesystem::path& dir);

/// Training and validation images of an image folder, and the layout that was recognised.
struct ImageSplit {
  std::vector<std::filesystem::path> train;
  std::vector<std::filesystem::path> val;
  /// "bsds300" (images/train + images/test), "train/val" (train/ and val|valid|validation|test/),
  /// or "flat" (every tenth image, at least one, held out for validation).
  std::string layout;
};

/// Recognises the layout of `root` and splits its images. Throws InputError when the folder has no
/// images, or too few to hold one out.
ImageSplit split_image_folder(const std::filesystem::path& root);

/// As split_image_folder, but a flat folder puts all its images in `val` (for evaluation only).
ImageSplit split_image_folder_or_all(const std::filesystem::path& root);

}  // namespace igb::data
