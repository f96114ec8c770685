# SPDX-License-Identifier: MIT
# Writes one program's man page from its --help (cmake -P, called by cmake/zkd_package.cmake):
#   -DHELP2MAN=... -DPROGRAM=path -DNAME=zkd -DSUMMARY="..." -DVERSION=0.1.0 -DOUT=zkd.1
#   [-DRUN_HELP=ON]  zkd: add `zkd run --help` (the daemon's options) and the packaged files
#   [-DZKD_SERVICE=ON]  add the FILES section of the Debian package
set(include_file "${OUT}.h2m")
set(sections "")
if(RUN_HELP)
    execute_process(COMMAND "${PROGRAM}" run --help OUTPUT_VARIABLE run_help
                    RESULT_VARIABLE rc COMMAND_ERROR_IS_FATAL ANY)
    # roff: backslashes doubled, a line starting with . or ' made literal.
    string(REPLACE "\\" "\\\\" run_help "${run_help}")
    string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" run_help "${run_help}")
    string(APPEND sections "[ZKD RUN]\n.nf\n${run_help}.fi\n")
endif()
if(ZKD_SERVICE)
    string(APPEND sections "[FILES]
.TP
.I /etc/zkd/zkd.conf
The settings of the zkd service (zkd run --config), commented with their defaults.
.TP
.I /lib/systemd/system/zkd.service
The systemd unit: runs zkd run as the user zkd, drains on stop.
.TP
.I /var/lib/zkd
The service's working directory (and that of exec task types without a dir).
")
endif()
set(include_arg)
if(sections)
    file(WRITE "${include_file}" "${sections}")
    set(include_arg "--include=${include_file}")
endif()
execute_process(
    COMMAND "${HELP2MAN}" --no-info --no-discard-stderr "--version-string=${VERSION}"
            "--name=${SUMMARY}" ${include_arg} "--output=${OUT}" "${PROGRAM}"
    COMMAND_ERROR_IS_FATAL ANY)
file(REMOVE "${include_file}")
