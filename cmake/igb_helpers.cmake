# igb_library(NAME SOURCES ... DEPS ...): one static library per area, sharing the PCH.
function(igb_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC torch ${ARG_DEPS})
  igb_use_pch(${name})
endfunction()

function(igb_use_pch target)
  if(IGB_USE_PCH)
    target_precompile_headers(${target} REUSE_FROM igb_pch)
  endif()
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# igb_test(NAME SOURCES ... DEPS ...): one GoogleTest binary per area, registered with CTest.
function(igb_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} torch GTest::gtest GTest::gtest_main Threads::Threads)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE
    IGB_BIN_DIR="${PROJECT_BINARY_DIR}/apps" IGB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  igb_use_pch(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES PROPERTIES LABELS "${ARG_LABELS}")
endfunction()
