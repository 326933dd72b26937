#pragma once

#include <cstddef>
#include <cstdint>

namespace igb {

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing and the checkpoint
/// checksums use it. crc32c("123456789") == 0xE3069283. Pass a previous result as `crc` to
/// continue a checksum over several pieces.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);

}  // namespace igb
