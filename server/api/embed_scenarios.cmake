# Writes OUT, a C++ file holding the shipped scenarios (SCENARIO_DIR/*.textproto) as string
# literals, so the server finds them whatever its working directory. Run by CMake at build
# time: cmake -DSCENARIO_DIR=... -DOUT=... -P embed_scenarios.cmake
file(GLOB files "${SCENARIO_DIR}/*.textproto")
list(SORT files)
set(body "// Generated from scenarios/*.textproto by server/api/embed_scenarios.cmake.\n")
string(APPEND body "#include \"server/api/scenarios.h\"\n\nnamespace pitlane::api {\n\n")
string(APPEND body "const std::vector<ShippedScenario>& ShippedScenarios() {\n")
string(APPEND body "  static const auto* const kScenarios = new std::vector<ShippedScenario>{\n")
foreach(file ${files})
  get_filename_component(name "${file}" NAME_WE)
  file(READ "${file}" text)
  string(APPEND body "      {\"${name}\", R\"pitlane_scenario(${text})pitlane_scenario\"},\n")
endforeach()
string(APPEND body "  };\n  return *kScenarios;\n}\n\n}  // namespace pitlane::api\n")
file(WRITE "${OUT}.tmp" "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
