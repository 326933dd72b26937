#include "data/image_folder.h"

#include <algorithm>

#include "core/error.h"
#include "data/image.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {

InputError unreadable(const fs::filesystem_error& e) {
  return InputError("data folder entry " + e.path1().string() +
                    " cannot be read: " + e.code().message());
}

// What `p` is, following symlinks; a symlink loop, a dangling symlink (an image the folder
// seems to hold would be missing from the data without a word) or an unreadable entry is an
// InputError.
fs::file_status status_of(const fs::path& p) {
  std::error_code ec;
  auto s = fs::status(p, ec);
  if (ec == std::errc::too_many_symbolic_link_levels)
    throw InputError("data folder entry " + p.string() + " is a symlink loop");
  if (ec == std::errc::no_such_file_or_directory && fs::is_symlink(fs::symlink_status(p, ec))) {
    std::error_code ignored;
    throw InputError("data folder entry " + p.string() + " is a broken link (to " +
                     fs::read_symlink(p, ignored).string() + ", which does not exist)");
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw InputError("data folder entry " + p.string() + " cannot be read: " + ec.message());
  return s;
}

// Depth first; `open` holds the real paths of the folders being listed, so a symlink back to one
// of them is a loop rather than an endless descent.
void collect_images(const fs::path& dir, std::vector<fs::path>& open, std::vector<fs::path>& out) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (ec) throw InputError("data folder " + dir.string() + " cannot be read: " + ec.message());
  if (std::find(open.begin(), open.end(), real) != open.end())
    throw InputError("data folder entry " + dir.string() + " is a symlink loop: it leads back to " +
                     real.string());
  open.push_back(real);
  try {
    for (const auto& e : fs::directory_iterator(dir)) {
      const auto s = status_of(e.path());
      if (fs::is_directory(s))
        collect_images(e.path(), open, out);
      else if (fs::is_regular_file(s) && is_image_file(e.path()))
        out.push_back(e.path());
    }
  } catch (const fs::filesystem_error& e) {
    throw unreadable(e);
  }
  open.pop_back();
}

}  // namespace

std::vector<fs::path> list_images(const fs::path& dir) {
  const auto s = status_of(dir);
  if (!fs::exists(s)) throw InputError("data folder " + dir.string() + " does not exist");
  if (!fs::is_directory(s)) throw InputError("data path " + dir.string() + " is not a folder");
  std::vector<fs::path> out, open;
  collect_images(dir, open, out);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> list_subfolders(const fs::path& dir) {
  std::vector<std::string> out;
  try {
    for (const auto& e : fs::directory_iterator(dir))
      if (fs::is_directory(status_of(e.path()))) out.push_back(e.path().filename().string());
  } catch (const fs::filesystem_error& e) {
    throw unreadable(e);
  }
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
