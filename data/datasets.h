#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/registry.h"
#include "data/classify_data.h"
#include "data/deblur_data.h"
#include "data/sr_data.h"

namespace igb::data {

/// Builds the training and validation sets of a classification dataset from `data` (the `--data`
/// value: "synthetic" or a folder).
using ClassifyDatasetFactory =
    std::function<ClassifyData(const std::string& data, const ClassifyDataOptions& options)>;

/// Builds the training patches and validation images of a super-resolution dataset.
using SrDatasetFactory =
    std::function<SrData(const std::string& data, const SrDataOptions& options)>;

/// Builds only the validation images of a super-resolution dataset (testing a checkpoint).
using SrEvalFactory =
    std::function<std::vector<SrEvalImage>(const std::string& data, const SrDataOptions& options)>;

/// Builds the training and validation pairs of a deblurring dataset.
using DeblurDatasetFactory =
    std::function<DeblurData(const std::string& data, const DeblurDataOptions& options)>;
/// Builds only the validation pairs of a deblurring dataset (testing a checkpoint).
using DeblurEvalFactory = std::function<std::vector<DeblurPair>(const std::string& data,
                                                                const DeblurDataOptions& options)>;

/// One dataset reader or generator. An entry belongs to one application family and fills that
/// family's factories only ("classify": `classify`; "sr": `sr` and `sr_eval`; "deblur": `deblur`
/// and `deblur_eval`).
///
///   DatasetSpec s;
///   s.family = "classify";
///   s.selected_by = "a folder with data_batch_1..5.bin and test_batch.bin";
///   s.recognises = [](const std::string& data) { return is_cifar_folder(data); };
///   s.classify = load_cifar10;
///   registry.add("classify/cifar10", s, "CIFAR-10 binary version");
struct DatasetSpec {
  /// The application family that reads it: "classify", "sr" or "deblur".
  std::string family;
  /// The `--data` value or folder layout that selects it (shown by `igb-tools list datasets`).
  std::string selected_by;
  /// Whether `data` holds this dataset; recognition tries a family's entries by ascending
  /// `recognise_order` and takes the first that says yes.
  std::function<bool(const std::string& data)> recognises;
  /// Rank in recognition (lower first); a catch-all layout goes last. Default 0.
  int recognise_order = 0;
  /// Why the dataset cannot be read on this machine (the package that ships it is missing), in
  /// one line; "" when it can. Unset: always readable.
  std::function<std::string()> unavailable;
  /// family "classify": builds the dataset.
  ClassifyDatasetFactory classify;
  /// family "sr": builds training and validation data.
  SrDatasetFactory sr;
  /// family "sr": builds the validation images alone.
  SrEvalFactory sr_eval;
  /// family "deblur": builds training and validation pairs.
  DeblurDatasetFactory deblur;
  /// family "deblur": builds the validation pairs alone.
  DeblurEvalFactory deblur_eval;
};

/// Every dataset reader and generator, named "<family>/<name>" ("classify/cifar10").
Registry<DatasetSpec>& dataset_registry();

/// Fills and freezes the dataset registry; safe to call more than once.
void register_builtin_datasets();

/// Adds the classification datasets (defined with their readers in classify_data.cpp).
void register_classify_datasets(Registry<DatasetSpec>& registry);
/// Adds the super-resolution datasets (defined with their readers in sr_data.cpp).
void register_sr_datasets(Registry<DatasetSpec>& registry);
/// Adds the deblurring datasets (defined with their readers in deblur_data.cpp).
void register_deblur_datasets(Registry<DatasetSpec>& registry);

/// The dataset names of one family without the family prefix ("cifar10", "mnist", ...).
std::vector<std::string> dataset_names(const std::string& family);

/// The entry `name` of `family` ("classify", "cifar10"). InputError "unknown dataset 'NAME';
/// valid datasets: ..." listing the family's names when there is none.
const DatasetSpec& dataset_spec(const std::string& family, const std::string& name);

/// Why dataset `name` of `family` cannot be read here ("" when it can, or when there is no such
/// dataset: reading it says so).
std::string dataset_unavailable(const std::string& family, const std::string& name);

/// The name (without prefix) of the first entry of `family` that recognises `data`, or "" when
/// none does.
std::string recognise_dataset(const std::string& family, const std::string& data);

}  // namespace igb::data
