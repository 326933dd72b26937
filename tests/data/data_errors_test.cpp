// Bad data is refused with one line naming the file, folder or class: truncated, damaged or
// foreign image files (and no decoder noise on the console), symlink loops, image folders whose
// validation split adds a class or holds an empty class folder.
#include <gtest/gtest.h>
#include <zlib.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/classify_data.h"
#include "data/image.h"
#include "data/image_folder.h"
#include "tests/support.h"

namespace igb::data {

namespace fs = std::filesystem;

namespace {

class DataErrorsTest : public ::testing::Test {
 protected:
  // Writes a 40×40 noisy image (noise keeps the compressed data large), returns its path.
  fs::path image(const fs::path& rel) {
    torch::manual_seed(3);
    fs::create_directories((root_ / rel).parent_path());
    write_image(root_ / rel, torch::rand({3, 40, 40}));
    return root_ / rel;
  }
  // The message of the InputError reading `path` throws; fails the test if the read printed
  // anything (libpng, libjpeg and OpenCV write to stderr on their own).
  static std::string read_error(const fs::path& path) {
    std::string message = "(no InputError)";
    testing::internal::CaptureStderr();
    try {
      read_image(path);
    } catch (const InputError& e) {
      message = e.what();
    }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << path;
    return message;
  }
  static std::string load_error(const fs::path& root) {
    try {
      load_classify_data(root.string(), ClassifyDataOptions());
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no InputError)";
  }
  test::TempDir tmp_;
  fs::path root_ = tmp_.path();
};

}  // namespace

TEST_F(DataErrorsTest, SoundImagesReadSilently) {
  for (const char* name : {"a.png", "b.jpg", "c.bmp"}) {
    const auto p = image(name);
    testing::internal::CaptureStderr();
    const auto t = read_image(p);
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    EXPECT_EQ(t.sizes(), torch::IntArrayRef({3, 40, 40})) << name;
  }
  // Lossless formats give back what was written, to the 8-bit grid.
  torch::manual_seed(3);
  const auto written = quantize_8bit(torch::rand({3, 40, 40}));
  EXPECT_TRUE(torch::allclose(read_image(root_ / "a.png"), written, 0, 1e-6));
  EXPECT_TRUE(torch::allclose(read_image(root_ / "c.bmp"), written, 0, 1e-6));
}

TEST_F(DataErrorsTest, TruncatedImagesSayWhatIsWrongAndPrintNothingElse) {
  const auto png = image("t.png"), jpg = image("t.jpg"), bmp = image("t.bmp");
  const auto png_half = fs::file_size(png) / 2, jpg_half = fs::file_size(jpg) / 2;
  fs::resize_file(png, png_half);
  fs::resize_file(jpg, jpg_half);
  fs::resize_file(bmp, 2000);
  EXPECT_EQ(read_error(png), "image " + png.string() +
                                 " is unreadable or corrupt: a truncated PNG (the data ends at "
                                 "byte " +
                                 std::to_string(png_half) + ", inside chunk IDAT)");
  EXPECT_EQ(read_error(jpg), "image " + jpg.string() +
                                 " is unreadable or corrupt: a truncated JPEG (the data ends at "
                                 "byte " +
                                 std::to_string(jpg_half) + ", before its end-of-image marker)");
  // 40 rows of 120 bytes after a 54-byte header.
  EXPECT_EQ(read_error(bmp), "image " + bmp.string() +
                                 " is unreadable or corrupt: a truncated BMP (2000 bytes, its "
                                 "header promises 4854)");
}

TEST_F(DataErrorsTest, DamagedEmptyAndForeignFilesAreNamed) {
  const auto png = image("d.png");
  {
    std::fstream f(png, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(png) / 2);
    f.seekg(middle);
    const char c = static_cast<char>(f.get());
    f.seekp(middle);
    f.put(static_cast<char>(~c));
  }
  const auto damaged = read_error(png);
  EXPECT_EQ(damaged.rfind("image " + png.string() +
                              " is unreadable or corrupt: a damaged PNG (chunk IDAT at byte ",
                          0),
            0u)
      << damaged;
  EXPECT_EQ(damaged.substr(damaged.size() - 15), " fails its CRC)") << damaged;

  std::ofstream(root_ / "empty.png").close();
  EXPECT_EQ(read_error(root_ / "empty.png"), "image " + (root_ / "empty.png").string() +
                                                 " is unreadable or corrupt: the file is empty");
  std::ofstream(root_ / "notes.jpg") << "not a picture";
  EXPECT_EQ(read_error(root_ / "notes.jpg"),
            "image " + (root_ / "notes.jpg").string() +
                " is unreadable or corrupt: not an image (its data is not PNG, JPEG or BMP)");
  EXPECT_EQ(read_error(root_ / "missing.png"),
            "image " + (root_ / "missing.png").string() + " does not exist");
}

// JPEG has no checksum; damage inside its compressed data shows only as libjpeg warnings, which
// would print a line and decode wrong pixels. They are refusals with the reason instead.
TEST_F(DataErrorsTest, DamagedJpegScanDataIsRefusedSilently) {
  const auto jpg = image("s.jpg");
  // A sound JPEG decodes to exactly what OpenCV's own libjpeg decoder gives.
  const cv::Mat cv_bgr = cv::imread(jpg.string(), cv::IMREAD_COLOR);
  ASSERT_FALSE(cv_bgr.empty());
  cv::Mat cv_rgb;
  cv::cvtColor(cv_bgr, cv_rgb, cv::COLOR_BGR2RGB);
  const auto expected = torch::from_blob(cv_rgb.data, {40, 40, 3}, torch::kUInt8)
                            .permute({2, 0, 1})
                            .to(torch::kFloat32)
                            .div(255.0f);
  EXPECT_TRUE(torch::equal(read_image(jpg), expected));

  std::string bytes;
  {
    std::ifstream in(jpg, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t sos = bytes.find("\xFF\xDA");
  ASSERT_NE(sos, std::string::npos);
  const size_t scan =
      sos + 2 + (static_cast<uint8_t>(bytes[sos + 2]) << 8 | static_cast<uint8_t>(bytes[sos + 3]));
  const size_t middle = scan + (bytes.size() - 2 - scan) / 2;
  // A restart marker in the middle of a scan that declares no restart interval.
  std::string marker = bytes;
  marker[middle] = '\xFF';
  marker[middle + 1] = '\xD5';
  std::ofstream(root_ / "marker.jpg", std::ios::binary) << marker;
  EXPECT_EQ(read_error(root_ / "marker.jpg"),
            "image " + (root_ / "marker.jpg").string() +
                " is unreadable or corrupt: a damaged JPEG (a marker or stray bytes interrupt its "
                "compressed image data)");
  // Any other damage to the scan either decodes (JPEG cannot tell) or is refused, never printed.
  for (size_t at = scan; at + 2 < bytes.size(); at += 97) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(~damaged[at]);
    std::ofstream(root_ / "flip.jpg", std::ios::binary | std::ios::trunc) << damaged;
    testing::internal::CaptureStderr();
    try {
      EXPECT_EQ(read_image(root_ / "flip.jpg").sizes(), torch::IntArrayRef({3, 40, 40}));
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(
                    "image " + (root_ / "flip.jpg").string() + " is unreadable or corrupt: a ", 0),
                0u)
          << e.what();
    }
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << "byte " << at;
  }
}

// PNG layouts other than 8-bit RGB (grey, 16-bit, alpha, palette-free grey with alpha) decode to
// what OpenCV's imread gives for them.
TEST_F(DataErrorsTest, PngLayoutsDecodeAsOpenCvDoes) {
  cv::RNG rng(7);
  struct Layout {
    const char* name;
    int type;
  };
  for (const Layout& l :
       {Layout{"grey8", CV_8UC1}, Layout{"grey16", CV_16UC1}, Layout{"rgb16", CV_16UC3},
        Layout{"rgba8", CV_8UC4}, Layout{"rgba16", CV_16UC4}}) {
    cv::Mat m(9, 13, l.type);
    rng.fill(m, cv::RNG::UNIFORM, 0, CV_MAT_DEPTH(l.type) == CV_16U ? 65536 : 256);
    const auto path = root_ / (std::string(l.name) + ".png");
    ASSERT_TRUE(cv::imwrite(path.string(), m));
    cv::Mat bgr = cv::imread(path.string(), cv::IMREAD_COLOR), rgb;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    const auto expected = torch::from_blob(rgb.data, {9, 13, 3}, torch::kUInt8)
                              .permute({2, 0, 1})
                              .to(torch::kFloat32)
                              .div(255.0f);
    EXPECT_TRUE(torch::equal(read_image(path), expected)) << l.name;
  }
}

// A PNG whose chunks carry correct CRCs around damaged compressed data (a crafted file): libpng's
// complaint becomes the reason, and nothing is printed.
TEST_F(DataErrorsTest, DamagedPngDataUnderCorrectCrcsIsRefusedSilently) {
  const auto png = image("z.png");
  std::string bytes;
  {
    std::ifstream in(png, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t idat = bytes.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  auto be32 = [&](size_t i) {
    return static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 24 |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 16 |
           static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 2])) << 8 |
           static_cast<uint8_t>(bytes[i + 3]);
  };
  const uint32_t length = be32(idat - 4);
  ASSERT_GT(length, 100u);
  // Overwrite the middle of the deflate stream, then give the chunk the CRC of its new content.
  for (size_t i = idat + 4 + length / 2; i < idat + 4 + length / 2 + 16; ++i) bytes[i] = '\xFF';
  const uint32_t crc = static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(bytes.data() + idat), static_cast<uInt>(length + 4)));
  for (int k = 0; k < 4; ++k)
    bytes[idat + 4 + length + k] = static_cast<char>((crc >> (24 - 8 * k)) & 0xFF);
  std::ofstream(root_ / "crafted.png", std::ios::binary) << bytes;
  const auto message = read_error(root_ / "crafted.png");
  EXPECT_EQ(message.rfind("image " + (root_ / "crafted.png").string() +
                              " is unreadable or corrupt: a damaged PNG (",
                          0),
            0u)
      << message;
  EXPECT_EQ(message.back(), ')');
}

namespace {

void put_be32(std::string& b, uint32_t v) {
  for (int k = 3; k >= 0; --k) b += static_cast<char>((v >> (8 * k)) & 0xFF);
}

/// A PNG chunk: length, type, data, CRC.
std::string png_chunk(const std::string& type, const std::string& data) {
  std::string c;
  put_be32(c, static_cast<uint32_t>(data.size()));
  c += type + data;
  put_be32(c, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(c.data() + 4),
                                          static_cast<uInt>(data.size() + 4))));
  return c;
}

/// A well-formed PNG of about a hundred bytes whose header claims `w`x`h` RGB pixels.
std::string png_claiming(uint32_t w, uint32_t h) {
  std::string ihdr;
  put_be32(ihdr, w);
  put_be32(ihdr, h);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB
  std::string zeros(64, '\0'), deflated(128, '\0');
  uLongf n = deflated.size();
  compress(reinterpret_cast<Bytef*>(deflated.data()), &n,
           reinterpret_cast<const Bytef*>(zeros.data()), zeros.size());
  deflated.resize(n);
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
         png_chunk("IDAT", deflated) + png_chunk("IEND", "");
}

/// A JPEG whose frame header claims `w`x`h` grey pixels, with a token scan and its end marker.
std::string jpeg_claiming(uint16_t w, uint16_t h) {
  std::string b = "\xFF\xD8";
  b += std::string("\xFF\xC0\x00\x0B\x08", 5) + char(h >> 8) + char(h & 0xFF) + char(w >> 8) +
       char(w & 0xFF) + std::string("\x01\x01\x11\x00", 4);
  b += std::string("\xFF\xDA\x00\x08\x01\x01\x00\x00\x3F\x00", 10);
  return b + std::string(16, '\0') + "\xFF\xD9";
}

}  // namespace

// A decompression bomb: a file of a hundred bytes whose header claims 60000x60000 pixels (10.8 GB
// as RGB) is refused from its header, before anything is decoded or allocated.
TEST_F(DataErrorsTest, ImagesClaimingMorePixelsThanTheLimitAreRefusedFromTheirHeader) {
  std::ofstream(root_ / "bomb.png", std::ios::binary) << png_claiming(60000, 60000);
  EXPECT_LT(fs::file_size(root_ / "bomb.png"), 200u);
  EXPECT_EQ(read_error(root_ / "bomb.png"),
            "image " + (root_ / "bomb.png").string() +
                " is 60000x60000 pixels, more than the limit of 100000000 (--max-image-pixels)");
  std::ofstream(root_ / "bomb.jpg", std::ios::binary) << jpeg_claiming(60000, 60000);
  EXPECT_EQ(read_error(root_ / "bomb.jpg"),
            "image " + (root_ / "bomb.jpg").string() +
                " is 60000x60000 pixels, more than the limit of 100000000 (--max-image-pixels)");
  // The limit is the caller's: a 40x40 image is 1600 pixels.
  const auto small = image("small.png");
  EXPECT_NO_THROW(read_image(small, 1600));
  try {
    read_image(small, 1599);
    ADD_FAILURE() << "a 1600-pixel image passed a limit of 1599";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is 40x40 pixels, more than the limit of 1599"),
              std::string::npos);
  }
  EXPECT_NO_THROW(check_image(small, 1600));
  EXPECT_THROW(check_image(root_ / "bomb.png"), InputError);
}

// An image folder's images are checked before training starts: a truncated or empty file is one
// line from the loader, not a failure at its batch in the middle of a run.
TEST_F(DataErrorsTest, ClassFolderImagesAreCheckedWhenTheDataIsLoaded) {
  for (const char* c : {"cat", "dog"})
    for (int i = 0; i < 3; ++i) image(fs::path("train") / c / (std::to_string(i) + ".png"));
  image("val/cat/0.png");
  image("val/dog/0.png");
  ClassifyDataOptions o;
  EXPECT_NO_THROW(load_classify_data(root_.string(), o));
  std::ofstream(root_ / "train" / "dog" / "2.png", std::ios::trunc);  // emptied
  EXPECT_EQ(load_error(root_), "image " + (root_ / "train" / "dog" / "2.png").string() +
                                   " is unreadable or corrupt: the file is empty");
  image("train/dog/2.png");
  std::ofstream(root_ / "val" / "cat" / "big.png", std::ios::binary) << png_claiming(9000, 9000);
  o.max_image_pixels = 1000000;
  try {
    load_classify_data(root_.string(), o);
    ADD_FAILURE() << "an image over the limit was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("big.png is 9000x9000 pixels, more than the limit of "
                                         "1000000"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(DataErrorsTest, SymlinkLoopsAreInputErrorsNamingThePath) {
  image("train/a/1.png");
  image("val/a/1.png");
  fs::create_directory_symlink(root_ / "train", root_ / "train/a/back");
  try {
    split_image_folder(root_);
    FAIL() << "no error for a symlink loop";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "data folder entry " + (root_ / "train/a/back").string() +
                                         " is a symlink loop: it leads back to " +
                                         fs::canonical(root_ / "train").string());
  }
  fs::remove(root_ / "train/a/back");
  fs::create_symlink(root_ / "val/a/self.png", root_ / "val/a/self.png");
  try {
    list_images(root_ / "val");
    FAIL() << "no error for a link to itself";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "data folder entry " + (root_ / "val/a/self.png").string() + " is a symlink loop");
  }
}

TEST_F(DataErrorsTest, ValidationClassesMustBeTrainingClassesAndNoClassFolderIsEmpty) {
  for (const char* p : {"train/cat/1.png", "train/dog/1.png", "val/cat/1.png", "val/emu/1.png"})
    image(p);
  EXPECT_EQ(load_error(root_), "image folder " + (root_ / "val").string() + ": class 'emu' (" +
                                   (root_ / "val/emu").string() +
                                   ") is not a training class; training classes: cat, dog");
  fs::remove_all(root_ / "val/emu");
  fs::create_directories(root_ / "val/dog");
  EXPECT_EQ(load_error(root_), "image folder " + (root_ / "val").string() + ": class 'dog' (" +
                                   (root_ / "val/dog").string() +
                                   ") holds no images (png, jpg, jpeg, bmp)");
  fs::remove_all(root_ / "val/dog");
  fs::create_directories(root_ / "train/eel");
  EXPECT_EQ(load_error(root_), "image folder " + (root_ / "train").string() + ": class 'eel' (" +
                                   (root_ / "train/eel").string() +
                                   ") holds no images (png, jpg, jpeg, bmp)");
  fs::remove_all(root_ / "train/eel");
  // A validation split may lack a class.
  auto d = load_classify_data(root_.string(), ClassifyDataOptions());
  EXPECT_EQ(d.classes, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(d.val->size(), 1);
}

}  // namespace igb::data
