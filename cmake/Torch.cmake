# LibTorch: a user's distribution through find_package(Torch) (CUDA builds included),
# else Debian's libtorch-dev, which ships no TorchConfig.cmake.
# ATTNSCOPE_TORCH_WHEEL=<a PyTorch wheel's torch/ folder> links that wheel's libraries directly, as
# torch.utils.cpp_extension does, without TorchConfig.cmake's search for a CUDA toolkit, cuDNN and
# NVTX: the engine includes no CUDA header, and libtorch_cuda registers the CUDA backend on load.
set(ATTNSCOPE_TORCH_WHEEL "" CACHE PATH "A PyTorch wheel's torch/ folder to link directly; empty: find_package(Torch)")
set(ATTNSCOPE_TORCH_CXX11_ABI 1 CACHE STRING "_GLIBCXX_USE_CXX11_ABI of that wheel (torch._C._GLIBCXX_USE_CXX11_ABI)")
add_library(attnscope_torch INTERFACE)
if(NOT ATTNSCOPE_TORCH_WHEEL)
  find_package(Torch QUIET)
endif()
if(ATTNSCOPE_TORCH_WHEEL)
  set(wheel_libraries)
  foreach(name torch torch_cpu torch_cuda c10 c10_cuda)
    if(EXISTS ${ATTNSCOPE_TORCH_WHEEL}/lib/lib${name}.so)
      list(APPEND wheel_libraries ${ATTNSCOPE_TORCH_WHEEL}/lib/lib${name}.so)
    elseif(name MATCHES "^(torch|torch_cpu|c10)$")
      message(FATAL_ERROR "LibTorch wheel: no lib/lib${name}.so in ${ATTNSCOPE_TORCH_WHEEL}")
    endif()
  endforeach()
  message(STATUS "attnscope: LibTorch from the wheel ${ATTNSCOPE_TORCH_WHEEL}: ${wheel_libraries}")
  target_link_libraries(attnscope_torch INTERFACE -Wl,--no-as-needed ${wheel_libraries} -Wl,--as-needed)
  target_include_directories(attnscope_torch SYSTEM INTERFACE ${ATTNSCOPE_TORCH_WHEEL}/include
                                                              ${ATTNSCOPE_TORCH_WHEEL}/include/torch/csrc/api/include)
  target_compile_definitions(attnscope_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=${ATTNSCOPE_TORCH_CXX11_ABI})
  set(ATTNSCOPE_TORCH_RPATH ${ATTNSCOPE_TORCH_WHEEL}/lib)
elseif(Torch_FOUND)
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
