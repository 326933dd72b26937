#pragma once

#include <string>
#include <vector>

#include "core/registry.h"

namespace igb::data {

/// A dataset the drivers can read: which application family uses it and how `--data` selects it.
struct DatasetSpec {
  std::string family;
  /// The `--data` value or folder layout that selects it.
  std::string selected_by;
};

/// Every dataset reader and generator, named "<family>/<name>" ("classify/cifar10").
Registry<DatasetSpec>& dataset_registry();

/// Fills and freezes the dataset registry; safe to call more than once.
void register_builtin_datasets();

/// The dataset names of one family without the family prefix ("cifar10", "mnist", ...).
std::vector<std::string> dataset_names(const std::string& family);

}  // namespace igb::data
