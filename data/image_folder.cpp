#include "data/image_folder.h"

#include <algorithm>

#include "core/error.h"
#include "data/image.h"

namespace igb::data {

namespace fs = std::filesystem;

std::vector<fs::path> list_images(const fs::path& dir) {
  if (!fs::exists(dir)) throw InputError("data folder " + dir.string() + " does not exist");
  if (!fs::is_directory(dir)) throw InputError("data path " + dir.string() + " is not a folder");
  std::vector<fs::path> out;
  for (const auto& e :
       fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink))
    if (e.is_regular_file() && is_image_file(e.path())) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

ImageSplit split_image_folder(const fs::path& root) {
  ImageSplit s;
  auto need = [&](const std::vector<fs::path>& v, const fs::path& where) {
    if (v.empty())
      throw InputError("data folder " + where.string() + " holds no images (png, jpg, jpeg, bmp)");
  };
  if (fs::is_directory(root / "images" / "train") && fs::is_directory(root / "images" / "test")) {
    s.layout = "bsds300";
    s.train = list_images(root / "images" / "train");
    s.val = list_images(root / "images" / "test");
    need(s.train, root / "images" / "train");
    need(s.val, root / "images" / "test");
    return s;
  }
  if (fs::is_directory(root / "train")) {
    for (const char* v : {"val", "valid", "validation", "test"}) {
      if (fs::is_directory(root / v)) {
        s.layout = "train/val";
        s.train = list_images(root / "train");
        s.val = list_images(root / v);
        need(s.train, root / "train");
        need(s.val, root / v);
        return s;
      }
    }
  }
  s.layout = "flat";
  auto all = list_images(root);
  need(all, root);
  if (all.size() < 2)
    throw InputError("data folder " + root.string() +
                     " holds one image; at least two are needed to hold one out for validation");
  for (size_t i = 0; i < all.size(); ++i)
    (i % 10 == 9 || (all.size() < 10 && i + 1 == all.size()) ? s.val : s.train).push_back(all[i]);
  return s;
}

ImageSplit split_image_folder_or_all(const fs::path& root) {
  const bool has_split =
      (fs::is_directory(root / "images" / "train") && fs::is_directory(root / "images" / "test")) ||
      fs::is_directory(root / "train");
  if (has_split) return split_image_folder(root);
  ImageSplit s;
  s.layout = "flat";
  s.val = list_images(root);
  if (s.val.empty())
    throw InputError("data folder " + root.string() + " holds no images (png, jpg, jpeg, bmp)");
  return s;
}

}  // namespace igb::data
