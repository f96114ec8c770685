#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A served task type in Python that returns its args unchanged (docs/python.md).

    zkd run --serve "served_echo=examples/python/served_echo.py"
    zkd submit served_echo '{"hello": "world"}' --wait

The same program works as a one-shot exec type (`--exec`): zkd.serve() runs one task when
zkd did not start it in serve mode."""

import zkd


@zkd.task("served_echo")
def echo(args):
    return args


if __name__ == "__main__":
    zkd.serve()
