# When this file is run by CMake through the find_package(Torch) command, the
# following variables will be set:
#   TORCH_CXX_FLAGS    -- Additional (required) compiler flags
if(NOT ANDROID)
  set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")
endif()
