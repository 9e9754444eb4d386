# Versions, install rules, the exported CMake package, the ABI's pkg-config
# file and the Debian package (CPack). Included by the top-level CMakeLists.txt
# after every target exists; docs/install.md "Install".
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ---- Versions ---------------------------------------------------------------
# attncheck's own version: project(attncheck VERSION ...) only. The contract
# version: the "Contract version: MAJOR.MINOR" line of docs/spec.md only.
set(attncheck_spec ${PROJECT_SOURCE_DIR}/docs/spec.md)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${attncheck_spec})
file(STRINGS ${attncheck_spec} attncheck_contract_line REGEX "^Contract version: [0-9]+\\.[0-9]+$" LIMIT_COUNT 1)
if(NOT attncheck_contract_line MATCHES "^Contract version: ([0-9]+)\\.([0-9]+)$")
  message(FATAL_ERROR "docs/spec.md has no 'Contract version: MAJOR.MINOR' line")
endif()
set(ATTNCHECK_CONTRACT_VERSION_MAJOR ${CMAKE_MATCH_1})
set(ATTNCHECK_CONTRACT_VERSION_MINOR ${CMAKE_MATCH_2})
set(ATTNCHECK_CONTRACT_VERSION ${CMAKE_MATCH_1}.${CMAKE_MATCH_2})
# The default oracle (docs/oracle.md; tests/packaging checks the bits against Boost).
set(ATTNCHECK_ORACLE_PRECISION_ID mpfr50)
set(ATTNCHECK_ORACLE_PRECISION_BITS 168)
set(ATTNCHECK_ORACLE_PRECISION "mpfr50: Boost.Multiprecision static_mpfr_float_50, 168-bit MPFR")
set(ATTNCHECK_VERSION_LINE
  "attncheck ${PROJECT_VERSION} (contract ${ATTNCHECK_CONTRACT_VERSION}, oracle ${ATTNCHECK_ORACLE_PRECISION_ID}: ${ATTNCHECK_ORACLE_PRECISION_BITS}-bit MPFR)")

set(attncheck_generated_include ${PROJECT_BINARY_DIR}/include)
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.hpp.in ${attncheck_generated_include}/attncheck/version.hpp @ONLY)
# Every part links attncheck_contract, so its users see the generated header.
target_include_directories(attncheck_contract PUBLIC $<BUILD_INTERFACE:${attncheck_generated_include}>)

# ---- Targets as a consumer sees them ------------------------------------------
# Exported name of each installed library. abi, oracle, laws and subjects
# are the public ones; the rest are what they link (static libraries carry
# their private dependencies into the consumer's link line). attncheck::laws
# does not link the bundled kernel: only attncheck::subjects does
# (tests/packaging/consumer_test.sh checks the consumer's link line).
set(attncheck_exported
  attncheck_abi=abi attncheck_contract=contract attncheck_reference=oracle attncheck_host=host attncheck_laws=laws
  attncheck_subjects=subjects attnimpl=attnimpl)
set(attncheck_exported_targets "")
foreach(pair ${attncheck_exported})
  string(REPLACE "=" ";" pair ${pair})
  list(GET pair 0 target)
  list(GET pair 1 name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  add_library(attncheck::${name} ALIAS ${target})
  list(APPEND attncheck_exported_targets ${target})
  # The targets give their include folders as source paths (PUBLIC ...); an
  # installed target finds the same headers under include/.
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    set(wrapped "")
    foreach(dir ${dirs})
      if(dir MATCHES "^\\$<")
        list(APPEND wrapped "${dir}")
      else()
        list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
      endif()
    endforeach()
    list(APPEND wrapped "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    list(REMOVE_DUPLICATES wrapped)
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
  endif()
endforeach()

# ---- Install layout -------------------------------------------------------------
set(ATTNCHECK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/attncheck)
set(ATTNCHECK_INSTALL_PLUGINDIR ${CMAKE_INSTALL_LIBDIR}/attncheck/plugins)

install(TARGETS attncheck RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(attncheck_plugins attncheck_naive_plugin attncheck_example_plugin attncheck_example_v2_plugin)
if(TARGET attnimpl_mutant_plugin)
  list(APPEND attncheck_plugins attnimpl_mutant_plugin)
endif()
install(TARGETS ${attncheck_plugins} LIBRARY DESTINATION ${ATTNCHECK_INSTALL_PLUGINDIR})

install(TARGETS ${attncheck_exported_targets} EXPORT attncheckTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})  # include/ is in each target's INSTALL_INTERFACE above
# Public headers: what a user includes and what those include: the contract
# and oracle (the case type among them), the ABI, the host and the laws (the
# gtest and rapidcheck entry points), the bundled subjects, and the generated
# version header. The gate, report and app layers are internal.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/reference/include/attncheck ${PROJECT_SOURCE_DIR}/properties/abi/include/attncheck
  ${PROJECT_SOURCE_DIR}/properties/host/include/attncheck ${PROJECT_SOURCE_DIR}/properties/laws/include/attncheck
  ${PROJECT_SOURCE_DIR}/properties/subjects/include/attncheck ${attncheck_generated_include}/attncheck
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

install(EXPORT attncheckTargets NAMESPACE attncheck:: DESTINATION ${ATTNCHECK_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/attncheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/attncheckConfig.cmake
  INSTALL_DESTINATION ${ATTNCHECK_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR ATTNCHECK_INSTALL_PLUGINDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attncheckConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attncheckConfig.cmake ${PROJECT_BINARY_DIR}/attncheckConfigVersion.cmake
  DESTINATION ${ATTNCHECK_INSTALL_CMAKEDIR})

# The C ABI for non-CMake builds: `pkg-config --cflags attncheck-abi`. Header
# only, so it lives in share/pkgconfig; ${pcfiledir} keeps it relocatable.
configure_file(${CMAKE_CURRENT_LIST_DIR}/attncheck-abi.pc.in ${PROJECT_BINARY_DIR}/attncheck-abi.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/attncheck-abi.pc DESTINATION ${CMAKE_INSTALL_DATADIR}/pkgconfig)

# ---- Debian package: cpack -G DEB (ci/package) -------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME attncheck)
set(CPACK_PACKAGE_VENDOR "attncheck developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "verification suite for attention kernels (laws, MPFR oracle, CI gate)")
set(CPACK_PACKAGE_DESCRIPTION
  "attncheck checks that an attention kernel computes what its attention contract (version ${ATTNCHECK_CONTRACT_VERSION}) says: a CI gate of property laws, shrunk and replayable counterexamples, and a reference oracle (${ATTNCHECK_ORACLE_PRECISION}). Ships the attncheck command, example subject plugins, the C subject ABI header, static libraries and a CMake package.")
# No public address exists: a reserved .invalid domain, replace when there is one.
set(CPACK_PACKAGE_CONTACT "attncheck developers <attncheck@example.invalid>")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Runtime libraries come from dpkg-shlibdeps over every ELF file (libc6,
# libgcc-s1, libmpfr6, libstdc++6 with their minimum versions). GMP is named
# explicitly: no shipped binary NEEDs it directly (MPFR is built on it), but
# the exported oracle target links it (PkgConfig::GMP).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libgmp10")
# What building against the installed CMake package needs (headers, config files).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS
  "cmake, pkg-config, libmpfr-dev, libgmp-dev, libboost-dev, librapidcheck-dev, nlohmann-json3-dev, libeigen3-dev, libgtest-dev")
include(CPack)
