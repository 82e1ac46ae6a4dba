# ATTNSCOPE_ENGINE_ONLY: the engine (core, models, analyses and their views, the session's options) and the
# headless commands info, run, analyze, bench and device-check, linked with LibTorch and small libraries only. Every library but
# LibTorch comes from ATTNSCOPE_CARRIED when given (the folder scripts/device_kit.sh unpacks Debian's
# packages into, usr/include and usr/lib/x86_64-linux-gnu below it), and only from there: this
# configure never looks for OpenCV, cairo, ImGui or GLFW, and finds nothing else by accident.
set(ATTNSCOPE_CARRIED "" CACHE PATH "Folder of the carried libraries (scripts/device_kit.sh); empty: the system's")

find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# An interface target attnscope_<name> for the library whose headers hold `header`, linking
# lib`library` (none given: header-only).
function(attnscope_engine_library name header)
  set(library ${ARGN})
  if(ATTNSCOPE_CARRIED)
    set(search PATHS ${ATTNSCOPE_CARRIED}/usr NO_DEFAULT_PATH)
  endif()
  find_path(ATTNSCOPE_${name}_INCLUDE ${header} ${search} PATH_SUFFIXES include include/x86_64-linux-gnu)
  if(library)
    find_library(ATTNSCOPE_${name}_LIBRARY ${library} ${search} PATH_SUFFIXES lib/x86_64-linux-gnu lib)
  endif()
  if(NOT ATTNSCOPE_${name}_INCLUDE OR (library AND NOT ATTNSCOPE_${name}_LIBRARY))
    message(FATAL_ERROR "attnscope engine: ${name} (${header}) not found in '${ATTNSCOPE_CARRIED}': "
                        "scripts/device_kit.sh unpacks the packages that carry it")
  endif()
  add_library(attnscope_${name} INTERFACE)
  target_include_directories(attnscope_${name} SYSTEM INTERFACE ${ATTNSCOPE_${name}_INCLUDE})
  if(library)
    target_link_libraries(attnscope_${name} INTERFACE ${ATTNSCOPE_${name}_LIBRARY})
  endif()
  message(STATUS "attnscope engine: ${name} ${ATTNSCOPE_${name}_INCLUDE} ${ATTNSCOPE_${name}_LIBRARY}")
endfunction()

attnscope_engine_library(json nlohmann/json.hpp)
attnscope_engine_library(yaml yaml-cpp/yaml.h yaml-cpp)
attnscope_engine_library(utf8proc utf8proc.h utf8proc)
attnscope_engine_library(zlib zlib.h z)
attnscope_engine_library(png png.h png16)
attnscope_engine_library(jpeg jpeglib.h jpeg)
attnscope_engine_library(sentencepiece_library sentencepiece_processor.h sentencepiece)
# SigLIP's tokenizer, in a module the engine opens at run time (core/sentencepiece_backend.h says why).
add_library(attnscope_sentencepiece MODULE core/sentencepiece_module.cpp)
target_include_directories(attnscope_sentencepiece PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(attnscope_sentencepiece PRIVATE attnscope_sentencepiece_library)

file(GLOB ATTNSCOPE_ENGINE_SOURCES CONFIGURE_DEPENDS core/*.cpp models/*.cpp analysis/*.cpp session/*.cpp views/*.cpp
     figures/*.cpp datasets/*.cpp)
# What reads, draws or encodes with OpenCV or cairo (the engine's own versions stay: *_engine.cpp), and the
# trainer (its glyph task is drawn with OpenCV).
foreach(drawing core/sentencepiece_module.cpp core/cv_image.cpp core/image_decode_opencv.cpp core/colormap_image.cpp
                core/output_files_png.cpp models/trainer.cpp datasets/glyph_task.cpp figures/render.cpp
                figures/cairo_text.cpp figures/plot.cpp views/plot_hover.cpp)
  list(REMOVE_ITEM ATTNSCOPE_ENGINE_SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/${drawing})
endforeach()
list(APPEND ATTNSCOPE_ENGINE_SOURCES app/main.cpp app/cli.cpp app/command_info.cpp app/command_models.cpp app/command_run.cpp
     app/command_analyze.cpp app/run_summary.cpp app/command_device_check.cpp app/bench_tools.cpp
     app/command_table_engine.cpp app/command_bench.cpp app/bench_family.cpp app/bench_scale.cpp app/command_fork_server.cpp)

add_executable(attnscope ${ATTNSCOPE_ENGINE_SOURCES})
target_include_directories(attnscope PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(attnscope PRIVATE attnscope_torch attnscope_json attnscope_yaml attnscope_utf8proc attnscope_zlib
                                        attnscope_png attnscope_jpeg ${CMAKE_DL_LIBS} Threads::Threads ${OpenMP_CXX_LIBRARIES})
target_compile_options(attnscope PRIVATE ${ATTNSCOPE_WARNINGS})
set_source_files_properties(core/assets.cpp PROPERTIES COMPILE_DEFINITIONS
  "ATTNSCOPE_SOURCE_DIR=\"${CMAKE_CURRENT_SOURCE_DIR}\";ATTNSCOPE_PYTHON=\"${ATTNSCOPE_PYTHON}\""
  SKIP_UNITY_BUILD_INCLUSION ON)
set_source_files_properties(core/yaml_checked.cpp PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
set_source_files_properties(core/sentencepiece_backend.cpp PROPERTIES COMPILE_DEFINITIONS
  "ATTNSCOPE_SENTENCEPIECE_MODULE=\"$<TARGET_FILE:attnscope_sentencepiece>\"" SKIP_UNITY_BUILD_INCLUSION ON)
add_dependencies(attnscope attnscope_sentencepiece)
set_source_files_properties(models/cpu_threads.cpp PROPERTIES COMPILE_OPTIONS "${OpenMP_CXX_FLAGS}"
                            SKIP_PRECOMPILE_HEADERS ON SKIP_UNITY_BUILD_INCLUSION ON)
target_precompile_headers(attnscope PRIVATE core/pch.h)
attnscope_unity(attnscope)
# The carried libraries (and a wheel's LibTorch) are found where they are, without LD_LIBRARY_PATH.
if(ATTNSCOPE_CARRIED)
  set(carried_rpath "${ATTNSCOPE_CARRIED}/usr/lib/x86_64-linux-gnu;${ATTNSCOPE_CARRIED}/lib/x86_64-linux-gnu")
endif()
# Exported symbols: the crash report's backtrace names our functions, not just their addresses.
set_target_properties(attnscope PROPERTIES BUILD_RPATH "${carried_rpath};${ATTNSCOPE_TORCH_RPATH}" ENABLE_EXPORTS ON)
message(STATUS "attnscope: engine-only build (commands info, run, analyze, bench, device-check)")
