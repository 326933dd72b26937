#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace igb::data {

/// The largest image igb reads by default, in pixels (width × height): 100 megapixels, 300 MB as
/// 8-bit RGB and 1.2 GB as the float tensor it becomes. `--max-image-pixels` changes it.
inline constexpr int64_t kDefaultMaxImagePixels = 100'000'000;

/// Reads an image file (PNG, JPEG or BMP, recognised by its content) as a float tensor [3, H, W]
/// in [0, 1], RGB. Grey images are replicated to three channels. Throws InputError naming the file
/// and what is wrong when it is missing, unreadable, empty, not an image, truncated (a PNG without
/// its IEND chunk, a JPEG without its end-of-image marker, a BMP shorter than its header says),
/// damaged (a PNG chunk failing its CRC) or cannot be decoded. A broken file is refused before any
/// decoder sees it, so nothing but that one error reaches the console. An image whose header
/// claims more than `max_pixels` pixels (width × height) is refused before anything is decoded or
/// allocated: a file of a hundred bytes can claim 60000×60000.
at::Tensor read_image(const std::filesystem::path& path,
                      int64_t max_pixels = kDefaultMaxImagePixels);

/// Checks what read_image checks before decoding (the file exists and is readable, its format is
/// recognised, its structure is whole and undamaged, its size within `max_pixels`) without
/// decoding it: the same InputError naming the file.
void check_image(const std::filesystem::path& path, int64_t max_pixels = kDefaultMaxImagePixels);

/// Writes a [C, H, W] tensor in [0, 1] (C = 1 or 3, RGB) as an 8-bit image; the format follows the
/// extension (png, jpg, bmp). The write is atomic.
void write_image(const std::filesystem::path& path, const at::Tensor& chw);

/// Luma of ITU-R BT.601 as MATLAB's rgb2ycbcr: Y = 16 + 65.481 R + 128.553 G + 24.966 B for RGB in
/// [0, 1]; returned divided by 255, so a [3, H, W] (or [N, 3, H, W]) input in [0, 1] gives Y in
/// [16/255, 235/255] with one channel.
at::Tensor rgb_to_y(const at::Tensor& rgb);

/// Full YCbCr of MATLAB's rgb2ycbcr, divided by 255 ([3, H, W] → [3, H, W]).
at::Tensor rgb_to_ycbcr(const at::Tensor& rgb);
/// Inverse of rgb_to_ycbcr.
at::Tensor ycbcr_to_rgb(const at::Tensor& ycbcr);

/// Rounds to the 8-bit grid and clamps to [0, 1], as saving and reloading an 8-bit image would.
at::Tensor quantize_8bit(const at::Tensor& x);

/// True when the file name has an image extension this project reads (png, jpg, jpeg, bmp).
bool is_image_file(const std::filesystem::path& path);

}  // namespace igb::data
