#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/crc32c.h"

namespace igb {

/// The masked form TFRecord stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

/// Writes TensorBoard event files (`events.out.tfevents.<time>.<host>`) with scalar summaries.
/// Each record is: uint64 length, masked CRC of the length, the Event protobuf, masked CRC of it.
/// The first event carries `file_version: "brain.Event:2"`.
class EventWriter {
 public:
  /// Creates a new event file in `dir`.
  explicit EventWriter(const std::filesystem::path& dir);
  /// Appends what is still held, if it can (a destructor cannot report a full disk).
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  /// Adds one scalar `tag` = `value` at `step` (held until flush()).
  void add_scalar(const std::string& tag, double value, int64_t step);
  /// Appends the records added since the last flush, whole or not at all (InputError naming the
  /// file and the system's reason when it cannot: append_file_bytes).
  void flush();

  const std::filesystem::path& path() const { return path_; }

 private:
  void write_record(const std::string& payload);

  std::filesystem::path path_;
  std::string pending_;
};

/// One decoded scalar from an event file (for tests and tools).
struct ScalarEvent {
  int64_t step = 0;
  std::string tag;
  float value = 0;
};

/// Reads an event file back, checking every length and payload CRC; throws InputError on a bad
/// record. Returns the file_version string in `file_version` and every scalar.
std::vector<ScalarEvent> read_event_file(const std::filesystem::path& path,
                                         std::string* file_version = nullptr);

}  // namespace igb
