#pragma once

#include <cstdint>
#include <string>

#include "data/image.h"

namespace igb::models {

/// Options every training driver shares (the common part of each optform).
struct TrainConfig {
  /// Model registry name.
  std::string model;
  /// "synthetic" (built-in generator) or a folder.
  std::string data = "synthetic";
  /// Total epochs (a resumed run continues up to this number).
  int64_t epochs = 10;
  /// Examples per minibatch.
  int64_t batch_size = 16;
  /// Learning rate.
  double lr = 1e-3;
  /// Built-in learning-rate decay over the epochs: "none", or "cosine" (from lr down to lr/100
  /// at the last epoch). Set per epoch; a schedule's lr_schedulers replace it.
  std::string lr_decay = "none";
  /// Epochs of linear warm-up before the decay: epoch e < lr_warmup trains at
  /// lr·(e + 1)/lr_warmup, later epochs at the decay's rate for their epoch. 0 = none.
  int64_t lr_warmup = 0;
  /// "sgd" or "adam".
  std::string optimizer = "adam";
  /// SGD momentum.
  double momentum = 0.9;
  /// L2 weight decay.
  double weight_decay = 0;
  /// Intra-op threads; 0 = all cores.
  int64_t threads = 0;
  /// Data-loading threads.
  int64_t workers = 2;
  /// Seed of weights, data order and augmentation.
  uint64_t seed = 1;
  /// "cpu" or "cuda".
  std::string device = "cpu";
  /// Run directory; empty = runs/<model>___<YYYY.MM.DD-HHMMSS>.
  std::string out;
  /// Checkpoint to resume from.
  std::string resume;
  /// Cap on minibatches per epoch; 0 = no cap.
  int64_t max_batches = 0;
  /// The largest image read, in pixels (width × height); larger ones are refused from their
  /// header (--max-image-pixels). Default data::kDefaultMaxImagePixels.
  int64_t max_image_pixels = data::kDefaultMaxImagePixels;
  /// Log a progress line every N minibatches when not on a terminal; 0 = per epoch only.
  int64_t log_every = 50;
  /// Compression schedule (YAML); empty = none.
  std::string compress;
  /// --int8-weights (8, 7, auto) and what options/ resolved it to on this machine: the schedule
  /// quantizer's 8-bit weights narrowed to int8_weight_bits (0: kept), with
  /// int8_weights_unsigned_only only by a class whose activations are unsigned
  /// (compress::WeightNarrowing).
  std::string int8_weights = "8";
  int64_t int8_weight_bits = 0;
  bool int8_weights_unsigned_only = false;
  /// Mixed precision: the forward pass under autocast (bfloat16 on CPU, float16 on CUDA with
  /// dynamic loss scaling); the parameters stay float32.
  bool amp = false;
  /// Start a fresh run in an --out folder that holds a run already, replacing its files
  /// (--overwrite); without it such a folder is refused unless the run resumes from it.
  bool overwrite = false;
  /// With `amp` on CPU, also scale the loss as on CUDA (bfloat16 does not need it): runs the
  /// loss scaler's path of the trainer without a GPU, for tests. Not an option.
  bool force_loss_scaler = false;
  /// Clean steps between two growths of the loss scale (tests shorten it). Not an option.
  int64_t loss_scale_growth_interval = 2000;
  /// Data-parallel processes to start on this machine (1 = train in this process). A process
  /// started as a rank of a job (WORLD_SIZE in its environment) never starts more.
  int64_t nproc = 1;
  /// Seconds a rank waits for the others (rendezvous and each collective) before it stops.
  double dist_timeout = 300;
};

}  // namespace igb::models
