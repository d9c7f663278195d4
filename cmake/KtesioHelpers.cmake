# Build helpers that enforce the house style: every target gets the same warnings, and
# -Werror is switched on by the presets and CI (KTESIO_WERROR).

add_library(ktesio_warnings INTERFACE)
target_compile_options(ktesio_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual)
if(KTESIO_WERROR)
  target_compile_options(ktesio_warnings INTERFACE -Werror)
endif()

# kt_cc_library(NAME SRCS ... DEPS ... [PUBLIC_INCLUDE dir])
function(kt_cc_library name)
  cmake_parse_arguments(ARG "" "PUBLIC_INCLUDE" "SRCS;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE ktesio_warnings)
  if(ARG_PUBLIC_INCLUDE)
    target_include_directories(${name} PUBLIC ${ARG_PUBLIC_INCLUDE})
  endif()
endfunction()

# kt_cc_binary(NAME SRCS ... DEPS ...)
function(kt_cc_binary name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} ktesio_warnings)
endfunction()

# kt_cc_test(NAME SRCS ... DEPS ... [LABELS ...])
function(kt_cc_test name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main ktesio_warnings)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 300)
endfunction()
