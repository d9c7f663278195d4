# cmake -DFILE=<tck_link_libraries.txt> -P link_check.cmake: fails when the kit links ktesiod.
file(READ "${FILE}" libs)
message(STATUS "ktesio-tck links: ${libs}")
if(libs MATCHES "ktesiod")
  message(FATAL_ERROR "ktesio-tck must be a pure API client but links: ${libs}")
endif()
