# SPDX-License-Identifier: MIT
# The Debian package (tools/package.sh runs CPack on an existing build): the programs and
# their man pages (component `runtime`), and what only the package installs (component
# `service`, outside `cmake --install`'s default): the systemd unit, the commented config
# /etc/zkd/zkd.conf (a conffile) and the sysusers.d entry for the zkd user. Maintainer
# scripts and conffiles are in packaging/deb/. Included from the top-level CMakeLists.txt.
include(GNUInstallDirs)
set(zkd_packaging "${PROJECT_SOURCE_DIR}/packaging")

# Man pages from each program's --help (help2man; tools/install-deps.sh installs it). Built
# with `all`; without help2man there are none, and tools/package.sh refuses to package. Not
# in sanitizer builds, which are never packaged (and whose leak checks would judge --help).
find_program(ZKD_HELP2MAN help2man)
find_program(ZKD_GZIP gzip)
set(zkd_man_pages)
if(NOT ZKD_SANITIZE STREQUAL "")
    # no man pages
elseif(ZKD_HELP2MAN AND ZKD_GZIP)
    set(zkd_man_summary_zkd "a distributed task platform coordinated by ZooKeeper")
    set(zkd_man_summary_zkd_loadgen "load a running zkd cluster and measure it")
    set(zkd_man_summary_zkd_zk_local_cli "start and stop a local ZooKeeper to try zkd out")
    set(zkd_man_summary_zkd_chaos "a local zkd cluster under faults, its invariants checked")
    set(zkd_man_summary_zkd_swarm "many zkd workers in one process, one ZooKeeper session each")
    foreach(program IN ITEMS zkd zkd_loadgen zkd_zk_local_cli zkd_chaos zkd_swarm)
        if(NOT TARGET ${program})
            continue()
        endif()
        get_target_property(name ${program} OUTPUT_NAME)
        if(NOT name)
            set(name ${program})
        endif()
        set(page "${PROJECT_BINARY_DIR}/man/${name}.1")
        set(extra)
        if(program STREQUAL "zkd")
            set(extra -DRUN_HELP=ON -DZKD_SERVICE=ON)
        endif()
        add_custom_command(OUTPUT "${page}.gz"
            COMMAND "${CMAKE_COMMAND}" "-DHELP2MAN=${ZKD_HELP2MAN}" "-DPROGRAM=$<TARGET_FILE:${program}>"
                    "-DSUMMARY=${zkd_man_summary_${program}}" "-DVERSION=${PROJECT_VERSION}"
                    "-DOUT=${page}" ${extra} -P "${PROJECT_SOURCE_DIR}/cmake/zkd_man.cmake"
            COMMAND "${ZKD_GZIP}" -9nf "${page}"
            DEPENDS ${program} "${PROJECT_SOURCE_DIR}/cmake/zkd_man.cmake"
            COMMENT "Man page ${name}.1" VERBATIM)
        list(APPEND zkd_man_pages "${page}.gz")
    endforeach()
    add_custom_target(zkd_man ALL DEPENDS ${zkd_man_pages})
    install(FILES ${zkd_man_pages} DESTINATION "${CMAKE_INSTALL_MANDIR}/man1" COMPONENT runtime)
else()
    message(STATUS "help2man or gzip not found: no man pages (tools/install-deps.sh installs them)")
endif()
install(FILES "${zkd_packaging}/copyright" README.md CHANGELOG.md
        DESTINATION "${CMAKE_INSTALL_DOCDIR}" COMPONENT runtime)
# The README's user links go to docs/: the same tree beside it (its links to the source
# tree, tools/ and CONTRIBUTING.md are for a checkout).
install(DIRECTORY docs/ DESTINATION "${CMAKE_INSTALL_DOCDIR}/docs" COMPONENT runtime)

# Absolute paths, installed only for the package (EXCLUDE_FROM_ALL keeps them out of a
# `cmake --install --prefix P`). Bookworm's units live in /lib/systemd/system.
install(FILES "${zkd_packaging}/zkd.service" DESTINATION /lib/systemd/system
        COMPONENT service EXCLUDE_FROM_ALL)
install(FILES "${zkd_packaging}/zkd.conf" DESTINATION /etc/zkd COMPONENT service EXCLUDE_FROM_ALL)
install(FILES "${zkd_packaging}/sysusers.conf" RENAME zkd.conf DESTINATION /usr/lib/sysusers.d
        COMPONENT service EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME zkd)
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed task platform coordinated by ZooKeeper")
set(CPACK_PACKAGE_CONTACT "zkd developers <zkd@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# One package of the components an operator needs; headers and libraries (`dev`) come from
# `cmake --install` into a prefix.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL runtime service)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The extended description (CPack puts the summary line first and indents the rest).
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "Every zkd node joins a ZooKeeper ensemble and runs for
master; one is elected, the others work. Clients submit tasks (a registered type plus JSON
arguments, or an operator's own program), the master assigns them, workers compute them and
publish the results.

This package holds zkd, with a systemd unit running `zkd run` as the user zkd (configured in
/etc/zkd/zkd.conf), zkd-loadgen, zkd-zk-local, zkd-chaos, zkd-swarm, and the Python module zkd
(a client of the HTTP API, and the program side of exec serve mode).")
# Library dependencies from dpkg-shlibdeps; systemd-sysusers for the zkd user (postinst).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "systemd | systemd-standalone-sysusers")
# zkd-zk-local and zkd-chaos start a local ZooKeeper (a Java program); the Python module
# (python3 -c "import zkd") needs python3. Schedules read cron expressions in a zone's local
# time from the tz database (tzdata; UTC needs none).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "zookeeper, default-jre-headless, python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "tzdata")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${zkd_packaging}/deb/conffiles" "${zkd_packaging}/deb/postinst"
    "${zkd_packaging}/deb/prerm" "${zkd_packaging}/deb/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
