# Checks who may include whom (docs/architecture.md, "Folders and who may include whom"): every
# project include of every source under core/ data/ models/ graph/ tools/ compress/ deploy/ options/
# apps/ must point to a layer its own layer may read. Prints each violation as FILE:LINE and fails.
#
#   cmake -DSOURCE_DIR=/path/to/igb -P cmake/check_includes.cmake
cmake_policy(VERSION 3.21)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_includes.cmake: pass -DSOURCE_DIR=<the repository root>")
endif()

# The layer of a path relative to the repository root, or "" when it is not checked.
# models/ holds two layers: the zoo (models/model.h and the architectures in models/<family>/),
# which knows only core/, and the solver layer above it (the trainer, the evaluators, the family
# descriptors and solvers, restoring a model from a checkpoint), which also reads data/ and
# compress/.
function(igb_layer_of path out)
  set(layer "")
  if(path MATCHES "^core/")
    set(layer core)
  elseif(path MATCHES "^data/")
    set(layer data)
  elseif(path MATCHES "^graph/")
    set(layer graph)
  elseif(path MATCHES "^tools/")
    set(layer tools)
  elseif(path MATCHES "^compress/")
    set(layer compress)
  elseif(path MATCHES "^runtime/")
    set(layer runtime)
  elseif(path MATCHES "^deploy/")
    set(layer deploy)
  elseif(path MATCHES "^models/(trainer[a-z_]*|loss_scaler|train_config|external_forward|model_from_checkpoint|evaluat[a-z_]*|famil[a-z_]*|report_sets)\\.(h|cpp)$"
         OR path MATCHES "^models/[a-z0-9_]+/[a-z0-9_]*(solver|evaluator|family|loss)\\.(h|cpp)$")
    set(layer solvers)
  elseif(path MATCHES "^models/")
    set(layer zoo)
  elseif(path MATCHES "^options/")
    set(layer options)
  elseif(path MATCHES "^apps/")
    set(layer apps)
  endif()
  set(${out} ${layer} PARENT_SCOPE)
endfunction()

# What each layer may include besides its own files (and LibTorch and other libraries).
set(allowed_core "")
set(allowed_data core)
set(allowed_zoo core)
set(allowed_graph core)
set(allowed_compress core graph)
set(allowed_runtime core graph compress)
set(allowed_tools core graph compress runtime)
set(allowed_deploy core graph compress runtime tools)
set(allowed_solvers core data zoo compress)
set(allowed_options core data zoo graph compress runtime tools deploy solvers)
set(allowed_apps core tools options)

file(GLOB_RECURSE sources RELATIVE ${SOURCE_DIR}
     ${SOURCE_DIR}/core/*.h ${SOURCE_DIR}/core/*.cpp ${SOURCE_DIR}/data/*.h ${SOURCE_DIR}/data/*.cpp
     ${SOURCE_DIR}/models/*.h ${SOURCE_DIR}/models/*.cpp ${SOURCE_DIR}/graph/*.h
     ${SOURCE_DIR}/graph/*.cpp ${SOURCE_DIR}/tools/*.h
     ${SOURCE_DIR}/tools/*.cpp ${SOURCE_DIR}/compress/*.h ${SOURCE_DIR}/compress/*.cpp
     ${SOURCE_DIR}/runtime/*.h ${SOURCE_DIR}/runtime/*.cpp
     ${SOURCE_DIR}/deploy/*.h ${SOURCE_DIR}/deploy/*.cpp ${SOURCE_DIR}/options/*.h
     ${SOURCE_DIR}/options/*.cpp ${SOURCE_DIR}/apps/*.h ${SOURCE_DIR}/apps/*.cpp)
list(LENGTH sources count)
if(count LESS 50)
  message(FATAL_ERROR "check_includes.cmake: only ${count} sources under ${SOURCE_DIR}")
endif()

set(violations 0)
foreach(file ${sources})
  igb_layer_of(${file} layer)
  file(STRINGS ${SOURCE_DIR}/${file} lines)
  set(line_no 0)
  foreach(line IN LISTS lines)
    math(EXPR line_no "${line_no} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\"")
      continue()
    endif()
    set(target ${CMAKE_MATCH_1})
    igb_layer_of(${target} target_layer)
    if(target_layer STREQUAL "" OR target_layer STREQUAL layer)
      continue()
    endif()
    if(NOT target_layer IN_LIST allowed_${layer})
      message("${file}:${line_no}: ${layer} may not include ${target} (${target_layer}); "
              "${layer} may include: ${allowed_${layer}}")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()

if(violations GREATER 0)
  message(FATAL_ERROR "${violations} include(s) break the rules of docs/architecture.md")
endif()
message("include rules hold for ${count} sources")
