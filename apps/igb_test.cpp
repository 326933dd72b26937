// igb-test: a thin main; all of it lives in options/.
#include "core/main_guard.h"
#include "options/drivers.h"

int main(int argc, char** argv) {
  return igb::guarded_main("igb-test", [&] { return igb::options::test_main(argc, argv); });
}
