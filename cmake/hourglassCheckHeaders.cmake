# Every header compiles on its own (the shape of Seastar's CheckHeaders.cmake):
# for each header, a generated source that includes only that header,
# compiled for syntax alone in an object library outside `all`, against the
# part's own usage requirements. A header that leans on what its includer
# happened to include first fails here, whoever includes it.
#
# A header whose own source file includes it first (src/x.cpp opening with
# "hourglass/x.hpp", or a private x.cpp with "x.hpp") is skipped: the build
# itself compiles it alone, first thing, and parsing it twice costs minutes
# (the daemon's headers pull in Beast).
#
#   hourglass_check_headers(<name> LINK <targets...> HEADERS <files...>)
#
# adds the object library check_headers_<name> to the hourglass_check_headers
# target (created by the caller).

# Sets `out` to TRUE when `header`'s own .cpp opens with an include of it.
function(hourglass_header_opens_its_source header out)
  set(${out} FALSE PARENT_SCOPE)
  get_filename_component(stem ${header} NAME_WE)
  get_filename_component(dir ${header} DIRECTORY)
  # Its source: beside it, or in the part's src/ for a public header.
  set(source ${dir}/${stem}.cpp)
  if(header MATCHES "/include/hourglass/")
    string(REGEX REPLACE "/include/hourglass(/[a-z_]+)?$" "/src" source_dir ${dir})
    set(source ${source_dir}/${stem}.cpp)
  endif()
  if(NOT EXISTS ${source})
    return()
  endif()
  # Its first include names this very header: a path that ends the header's own.
  file(STRINGS ${source} first REGEX "^#include" LIMIT_COUNT 1)
  if(first MATCHES "^#include \"(.+)\"$")
    string(LENGTH "/${CMAKE_MATCH_1}" n)
    string(LENGTH "${header}" h)
    if(h GREATER n)
      math(EXPR from "${h} - ${n}")
      string(SUBSTRING "${header}" ${from} -1 tail)
      if(tail STREQUAL "/${CMAKE_MATCH_1}")
        set(${out} TRUE PARENT_SCOPE)
      endif()
    endif()
  endif()
endfunction()

function(hourglass_check_headers name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "LINK;HEADERS")
  set(sources)
  foreach(header IN LISTS arg_HEADERS)
    hourglass_header_opens_its_source(${header} covered)
    if(covered)
      continue()
    endif()
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${header})
    string(MAKE_C_IDENTIFIER ${rel} id)
    set(source ${CMAKE_CURRENT_BINARY_DIR}/${name}/${id}.cpp)
    file(CONFIGURE OUTPUT ${source} CONTENT "#include \"${header}\"\n")
    list(APPEND sources ${source})
  endforeach()
  if(NOT sources)
    return()
  endif()
  add_library(check_headers_${name} OBJECT EXCLUDE_FROM_ALL ${sources})
  target_link_libraries(check_headers_${name} PRIVATE ${arg_LINK} hourglass_warnings)
  # Parsing and template checks are what the check needs; no code is made.
  target_compile_options(check_headers_${name} PRIVATE -fsyntax-only)
  add_dependencies(hourglass_check_headers check_headers_${name})
endfunction()
