# igb_library(NAME SOURCES ... DEPS ...): one static library per area, sharing the PCH.
function(igb_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC torch ${ARG_DEPS})
  igb_use_pch(${name})
endfunction()

# igb_plain_sources(FILE ...): sources that include no LibTorch header compile without the
# precompiled header. Loading it costs about 5 s per translation unit, more than such a source
# takes to compile on its own (under 1 s). Call it in the folder that lists the sources.
function(igb_plain_sources)
  set_source_files_properties(${ARGN} PROPERTIES SKIP_PRECOMPILE_HEADERS ON
                                               SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()

# igb_unity_group(TARGET GROUP FILE ...): compiles the listed sources of TARGET as one translation
# unit. Each unit pays about 3-5 s to load the precompiled header, more than a small source takes to
# compile; sources grouped must not share names in their anonymous namespaces.
function(igb_unity_group target group)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
  set_source_files_properties(${ARGN} PROPERTIES UNITY_GROUP ${group})
endfunction()

function(igb_use_pch target)
  if(IGB_USE_PCH)
    target_precompile_headers(${target} REUSE_FROM igb_pch)
  endif()
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter)
endfunction()

# The precompiled header of the test binaries: the shared one plus GoogleTest, at -O0 (see igb_test).
function(igb_test_pch)
  add_library(igb_test_pch STATIC ${PROJECT_SOURCE_DIR}/cmake/pch.cpp)
  target_link_libraries(igb_test_pch PUBLIC torch nlohmann_json::nlohmann_json GTest::gtest Threads::Threads)
  target_compile_options(igb_test_pch PRIVATE -O0)
  if(IGB_USE_PCH)
    target_precompile_headers(igb_test_pch PRIVATE ${PROJECT_SOURCE_DIR}/cmake/pch.h <gtest/gtest.h>)
  endif()
endfunction()

# igb_test(NAME SOURCES ... DEPS ...): one GoogleTest binary per area, registered with CTest.
function(igb_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} torch GTest::gtest GTest::gtest_main Threads::Threads)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE
    IGB_BIN_DIR="${PROJECT_BINARY_DIR}/apps" IGB_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # Test sources are glue around LibTorch, which is optimised already: -O0 with a PCH of their
  # own (igb_test_pch) compiles them in about half the time of -O2.
  if(IGB_USE_PCH)
    target_precompile_headers(${name} REUSE_FROM igb_test_pch)
  endif()
  target_compile_options(${name} PRIVATE -O0 -Wall -Wextra -Wno-unused-parameter)
  # Test sources are compiled four to a translation unit: each unit pays about 3 s to load the
  # precompiled header, more than most test sources take to compile.
  set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 4)
  # Under ctest the programs the tests start see no opencv-doc samples (scoring every tiny run on
  # the photographs would cost minutes); tests of real data ask for them (tests/support.h,
  # RealOpencvSamples).
  # (LABELS last: an empty label list would otherwise swallow the next property's name.)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES PROPERTIES
    ENVIRONMENT "IGB_OPENCV_SAMPLES=${CMAKE_BINARY_DIR}/no-opencv-samples" LABELS "${ARG_LABELS}")
endfunction()
