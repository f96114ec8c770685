// SPDX-License-Identifier: MIT
// Boost.JSON compiled into the fuzz build itself (header-only mode), so that its parser is
// instrumented too and libFuzzer is guided by coverage inside it.
#include <boost/json/src.hpp>
