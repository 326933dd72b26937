#pragma once

namespace igb::options {

/// The whole of `igb-serve worker|master ...` (docs/serving.md). Returns the exit code; throws on
/// errors (InputError → exit 2, a failed chain → exit 1).
int serve_main(int argc, char** argv);

}  // namespace igb::options
