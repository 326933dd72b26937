#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace igb {

/// A storage a LibTorch pickle loads by persistent id, ('storage', torch.<Type>Storage, key,
/// location, numel): LibTorch sizes the storage by `numel`, not by the record it reads.
struct PickledStorage {
  std::string key;
  /// The storage class ("FloatStorage") and the bytes of one element.
  std::string type;
  int64_t itemsize = 0;
  int64_t numel = 0;
};

/// A tensor a pickle rebuilds on a storage (torch._utils._rebuild_tensor_v2(storage, offset,
/// sizes, strides, ...)).
struct PickledTensor {
  /// Index into PickleScan::storages.
  size_t storage = 0;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

struct PickleScan {
  std::vector<PickledStorage> storages;
  std::vector<PickledTensor> tensors;
};

/// Reads a pickle of LibTorch's serialization (protocol 2 with the opcodes its pickler writes,
/// and those of protocol 4) as a stack machine that builds no objects, to find the storages it
/// loads and the tensors it views on them, so that they can be checked against the archive's
/// records before LibTorch trusts them. InputError naming `where` and the byte offset for a
/// truncated stream, an opcode LibTorch's unpickler does not know, or a malformed persistent id
/// or tensor.
PickleScan scan_torch_pickle(const std::string& bytes, const std::string& where);

/// The bytes one element of a LibTorch storage class ("FloatStorage") takes; 0 for a class it
/// does not have.
int64_t storage_itemsize(const std::string& type);

/// The elements of its storage that `t` reaches: offset + Σ (size − 1)·stride + 1, or 0 for an
/// empty tensor; -1 when a size, stride or the offset is negative or the extent overflows.
int64_t tensor_extent(const PickledTensor& t);

}  // namespace igb
