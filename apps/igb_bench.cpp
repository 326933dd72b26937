// igb-bench: a thin main; all of it lives in options/bench/.
#include "core/main_guard.h"
#include "options/bench/bench.h"

int main(int argc, char** argv) {
  return igb::guarded_main("igb-bench", [&] { return igb::options::bench_main(argc, argv); });
}
