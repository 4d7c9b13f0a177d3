# Chat templates (issue 23): a Jinja2-subset interpreter (server/text/jinja/) behind
# server/text/chat_template.h; needs nlohmann_json only (no PCRE2). Included from
# server/text/CMakeLists.txt; flashserve_text links it when that target exists.
find_package(nlohmann_json 3 QUIET)
if(nlohmann_json_FOUND)
  add_library(flashserve_chat_template STATIC
    ${CMAKE_CURRENT_LIST_DIR}/chat_template.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/value.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/lexer.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/parser.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/interpreter.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/builtins.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/filters.cc
    ${CMAKE_CURRENT_LIST_DIR}/jinja/py_str.cc)
  target_link_libraries(flashserve_chat_template PUBLIC flashserve_core flashserve_utf8 nlohmann_json::nlohmann_json)
  if(TARGET flashserve_text)
    target_link_libraries(flashserve_text PUBLIC flashserve_chat_template)
  endif()
else()
  message(STATUS "flashserve: chat templates skipped (nlohmann_json not found)")
endif()
