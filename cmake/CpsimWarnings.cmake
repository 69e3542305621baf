# Flags every cpsim target gets: warnings, optimisation, sanitizers.
add_library(cpsim_flags INTERFACE)
target_compile_options(cpsim_flags INTERFACE -Wall -Wextra)
# GCC 12 at -O3 reports a false -Wrestrict inside std::string's operator+ (GCC bug 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(cpsim_flags INTERFACE -Wno-restrict)
endif()
if(CPSIM_NATIVE)
  target_compile_options(cpsim_flags INTERFACE -march=native)
elseif(CPSIM_MARCH)
  target_compile_options(cpsim_flags INTERFACE -march=${CPSIM_MARCH})
endif()
if(CPSIM_SANITIZE STREQUAL "address")
  target_compile_options(cpsim_flags INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer)
  target_link_options(cpsim_flags INTERFACE -fsanitize=address,undefined)
  # GCC 12 and later with -fsanitize=address report a false -Wmaybe-uninitialized inside std::regex's compiler
  # (GCC bug 105616); the plain builds keep the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(cpsim_flags INTERFACE -Wno-maybe-uninitialized)
  endif()
elseif(CPSIM_SANITIZE STREQUAL "thread")
  target_compile_options(cpsim_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(cpsim_flags INTERFACE -fsanitize=thread)
endif()
