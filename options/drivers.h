#pragma once

namespace igb::options {

/// The whole of `igb-train`: `--optform=NAME` (first argument) selects the option set, the rest is
/// parsed by CLI11, inputs are validated, then the run directory is written. Returns the exit code;
/// throws on errors (InputError → exit 2).
int train_main(int argc, char** argv);

/// The whole of `igb-test --optform=NAME --checkpoint C ...`.
int test_main(int argc, char** argv);

/// The whole of `igb-tools COMMAND ...`.
int tools_main(int argc, char** argv);

}  // namespace igb::options
