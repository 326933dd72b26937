#pragma once

#include "models/model.h"

namespace igb {
class Checkpoint;
}

namespace igb::models {

/// Rebuilds the exact model a checkpoint was saved from (registry name, options, thinning
/// recipes, then the quantizer's preparation: compress::restore_quantization) and loads its
/// weights. It sits above the zoo (models/model.h knows no compression): the trainer, the
/// evaluators and the tools rebuild models through it.
Model model_from_checkpoint(const Checkpoint& checkpoint);

/// Refuses --model-arg values that differ from the model options stored in `checkpoint` (a resumed
/// run keeps the checkpoint's model); values equal to the checkpoint's are accepted.
void check_model_args_match(const nlohmann::json& model_args, const Checkpoint& checkpoint);

/// The dataset a resumed run trains on when --data was not given (`given` false): the one
/// `checkpoint`'s run named in its config, else `data` unchanged.
std::string resumed_data(const std::string& data, bool given, const Checkpoint& checkpoint);

}  // namespace igb::models
