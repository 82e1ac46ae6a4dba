# LibTorch: a user's distribution through find_package(Torch) (CUDA builds included),
# else Debian's libtorch-dev, which ships no TorchConfig.cmake.
add_library(attnscope_torch INTERFACE)
find_package(Torch QUIET)
if(Torch_FOUND)
  message(STATUS "attnscope: LibTorch from find_package(Torch): ${TORCH_INSTALL_PREFIX}")
  target_link_libraries(attnscope_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(attnscope_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  target_compile_options(attnscope_torch INTERFACE ${TORCH_CXX_FLAGS})
else()
  find_path(ATTNSCOPE_TORCH_API_INCLUDE torch/torch.h
            PATHS /usr/include/torch/csrc/api/include NO_DEFAULT_PATH)
  find_library(ATTNSCOPE_LIBTORCH torch)
  find_library(ATTNSCOPE_LIBTORCH_CPU torch_cpu)
  find_library(ATTNSCOPE_LIBC10 c10)
  if(NOT ATTNSCOPE_TORCH_API_INCLUDE OR NOT ATTNSCOPE_LIBTORCH_CPU OR NOT ATTNSCOPE_LIBC10)
    message(FATAL_ERROR "LibTorch not found: install Debian's libtorch-dev "
                        "(scripts/setup.sh does) or pass -DCMAKE_PREFIX_PATH=/path/to/libtorch")
  endif()
  message(STATUS "attnscope: Debian LibTorch (${ATTNSCOPE_LIBTORCH_CPU})")
  # --no-as-needed keeps libtorch.so linked: it registers operators at load time.
  target_link_libraries(attnscope_torch INTERFACE
    -Wl,--no-as-needed ${ATTNSCOPE_LIBTORCH} ${ATTNSCOPE_LIBTORCH_CPU} ${ATTNSCOPE_LIBC10} -Wl,--as-needed)
  target_include_directories(attnscope_torch SYSTEM INTERFACE ${ATTNSCOPE_TORCH_API_INCLUDE})
endif()
