// SPDX-License-Identifier: MIT
// The status page served at / (and its script and style under /ui/): static files compiled
// into the program, so the page needs nothing from outside the process (no CDN). The page
// polls GET /v1/status with the bearer token (taken from the URL fragment `#token=...` or
// typed in once, kept in the tab's sessionStorage) and draws everything itself.
#pragma once

#include <string_view>

namespace zkd::http {

/// One static file of the page.
struct page_file {
    std::string_view path;  ///< "/", "/ui/status.js", "/ui/status.css"
    std::string_view content_type;
    std::string_view body;
};

/// The file served at `path`; null for any other path.
const page_file* find_page_file(std::string_view path) noexcept;

/// The Content-Security-Policy the page is served with: its own script, style and API only;
/// no inline script, no framing.
inline constexpr std::string_view page_content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace zkd::http
