// The search page: GET / at the broker serves one self-contained HTML page (its style and script
// inline, nothing loaded from elsewhere: it works offline) that searches through /search with
// snippets, pages through the ranking, shows the answer's time, warns of partial answers, and links
// to the cluster's state. Tested in headless Chromium (tests/integration/search_page_test.py).
#pragma once
#include <string>

namespace warp {

const std::string& search_page_html();

}  // namespace warp
