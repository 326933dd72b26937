// igb-serve: a thin main; all of it lives in options/serve_commands/.
#include "core/main_guard.h"
#include "options/serve_commands/serve_command.h"

int main(int argc, char** argv) {
  return igb::guarded_main("igb-serve", [&] { return igb::options::serve_main(argc, argv); });
}
