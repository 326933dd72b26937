#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>

namespace igb {

/// Writes a float32 tensor (converted from any floating dtype, any device) as a NumPy .npy file
/// (format 1.0, little-endian, C order), atomically.
void write_npy(const std::filesystem::path& path, const at::Tensor& tensor);

/// Reads a float32 .npy file ('<f4', C order, format 1.0 to 3.0) into a CPU tensor. A file that
/// cannot be read, is malformed, or holds another dtype throws InputError naming the file and why.
at::Tensor read_npy(const std::filesystem::path& path);

}  // namespace igb
