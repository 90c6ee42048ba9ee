#!/usr/bin/env python3
"""The broker's search page (GET /) in headless Chromium, driven by Selenium (Debian's chromium,
chromium-driver and python3-selenium, which deploy/install-deps.sh installs), against a cluster on
loopback (warp-indexer serve over Cranfield with --write and --tail, two leaves, a broker with a
token): the page is self-contained (no outside URL, a Content-Security-Policy that allows none, no
console error); a search asks for the token, then shows the API's hits in order with their snippets
highlighted; the next and previous pages are the API's; "all words" is mode=and; a document's
markup shows as text, never as elements; facets over written documents' fields are the API's, a
click on one filters the hits as the API does and a click on its chip removes the filter; a leaf
killed gives a visible partial-answer warning.
WARP_SCREENSHOT=FILE keeps a screenshot of the first page (docs/images/search-page.png).
usage: search_page_test.py BUILD_DIR CRANFIELD_DIR     (exit 77: no browser here)"""
import json, os, re, shutil, sys, urllib.parse, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Harness, WritesCluster  # noqa: E402

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    # Debian's python3-selenium is the system Python's: run there when this is another Python.
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("search_page_test: SKIPPED: python3-selenium is not installed (deploy/install-deps.sh installs it)")
    sys.exit(77)
BROWSER, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not BROWSER or not DRIVER:
    print("search_page_test: SKIPPED: chromium or chromium-driver is not installed (deploy/install-deps.sh)")
    sys.exit(77)

build, data = sys.argv[1], sys.argv[2]
h = Harness(build, "warp-page-")
fail = h.fail
TOKEN = "page-token-1"
driver = None

try:
    cluster = WritesCluster(h, data, TOKEN, indexer_flags=["--keyword-fields", "kind", "--numeric-fields", "year"])

    # The page itself: HTML, its own policy, nothing from elsewhere.
    with urllib.request.urlopen(cluster.base + "/") as r:
        page, headers = r.read().decode(), dict(r.headers)
    if not headers.get("Content-Type", "").startswith("text/html"):
        fail("GET /: %s" % headers)
    if "default-src 'self'" not in headers.get("Content-Security-Policy", ""):
        fail("GET /: no Content-Security-Policy of its own: %s" % headers)
    if re.search(r"""(src|href|action)\s*=\s*["']?(https?:)?//""", page, re.I) or re.search(r"<script[^>]*src", page, re.I):
        fail("the page loads something from elsewhere")

    def api(**params):
        status, body, _ = cluster.call("GET", "/search?" + urllib.parse.urlencode(params, doseq=True))
        if status != 200:
            fail("API %s: %d %s" % (params, status, body[:200]))
        return json.loads(body)

    options = webdriver.ChromeOptions()
    options.binary_location = BROWSER
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    # A condition read while the page replaces its hits finds elements gone: asked again.
    wait = WebDriverWait(driver, 20, ignored_exceptions=[StaleElementReferenceException])
    driver.get(cluster.base + "/")

    def search_in_page(q, mode="any word"):
        box = driver.find_element(By.ID, "q")
        box.clear()
        box.send_keys(q)
        Select(driver.find_element(By.ID, "mode")).select_by_visible_text(mode)
        driver.find_element(By.ID, "go").click()

    def shown_ids():
        return [m.text.split(" \u00b7 ")[0] for m in driver.find_elements(By.CSS_SELECTOR, ".hit .meta")]

    def status_says(text):
        return lambda d: text in d.find_element(By.ID, "status").text

    # The broker asks for a token: the page asks for it, then searches.
    search_in_page("boundary layer")
    wait.until(lambda d: d.find_element(By.ID, "token").is_displayed())
    driver.find_element(By.ID, "token-value").send_keys(TOKEN)
    driver.find_element(By.CSS_SELECTOR, "#token button").click()
    wait.until(status_says("Results 1\u201310"))
    expected = api(q="boundary layer", k=10, snippet="body", snippet_length=220)  # as the page asks
    if shown_ids() != [x["id"] for x in expected["hits"]]:
        fail("page 1 shows %s, the API %s" % (shown_ids(), [x["id"] for x in expected["hits"]]))
    marks = driver.find_elements(By.CSS_SELECTOR, ".hit .snippet em")
    if not marks or not all(m.text.lower().startswith(("boundar", "layer")) for m in marks):
        fail("highlights: %s" % [m.text for m in marks][:10])
    first_snippet = driver.find_element(By.CSS_SELECTOR, ".hit .snippet").get_attribute("innerHTML")
    if first_snippet != expected["hits"][0]["snippet"]:
        fail("the first hit's snippet %r is not the API's %r" % (first_snippet, expected["hits"][0]["snippet"]))
    if "ms" not in driver.find_element(By.ID, "status").text or driver.find_element(By.ID, "partial").is_displayed():
        fail("status %r, partial shown %s" % (driver.find_element(By.ID, "status").text,
                                               driver.find_element(By.ID, "partial").is_displayed()))
    if os.environ.get("WARP_SCREENSHOT"):
        driver.save_screenshot(os.environ["WARP_SCREENSHOT"])

    # Pages: the API's, in order.
    driver.find_element(By.ID, "next").click()
    wait.until(status_says("Results 11\u201320"))
    if shown_ids() != [x["id"] for x in api(q="boundary layer", k=10, offset=10)["hits"]]:
        fail("page 2 is not the API's")
    driver.find_element(By.ID, "prev").click()
    wait.until(status_says("Results 1\u201310"))
    if shown_ids() != [x["id"] for x in expected["hits"]]:
        fail("back on page 1: %s" % shown_ids())
    search_in_page("boundary layer", "all words")
    wait.until(lambda d: shown_ids() == [x["id"] for x in api(q="boundary layer", k=10, mode="and")["hits"]])

    # The query syntax in the box: an excluded word leaves the API's hits for the same query, and a
    # query the syntax cannot take shows the broker's reason.
    search_in_page("boundary layer -flow")
    wait.until(lambda d: shown_ids() == [x["id"] for x in api(q="boundary layer -flow", k=10)["hits"]])
    if shown_ids() == [x["id"] for x in expected["hits"]]:
        fail("-flow changed nothing on the page")
    search_in_page('boundary "layer')
    wait.until(lambda d: d.find_element(By.ID, "error").is_displayed())
    if "column 10" not in driver.find_element(By.ID, "error").text:
        fail("the syntax error shown: %r" % driver.find_element(By.ID, "error").text)

    # A document's markup is text on the page.
    status, body, _ = cluster.call("PUT", "/indexes/default/documents/page-1", json.dumps(
        {"title": "<b>bold title</b>", "body": "zqxjk <img id=injected src=x> zqxjk text"}).encode())
    if status not in (200, 201):
        fail("PUT: %d %s" % (status, body))
    h.wait_until(lambda: api(q="zqxjk", k=1, after=json.loads(body)["sequence"])["hits"], 30, "the written document searchable")
    search_in_page("zqxjk")
    wait.until(status_says("Results 1\u20131"))
    hit = driver.find_element(By.CSS_SELECTOR, ".hit")
    if driver.find_elements(By.ID, "injected") or driver.find_elements(By.CSS_SELECTOR, ".hit b, .hit img"):
        fail("a document's markup became elements: %s" % hit.get_attribute("innerHTML"))
    if "<img id=injected src=x>" not in hit.text or "<b>bold title</b>" not in hit.text:
        fail("a document's markup not shown as text: %r" % hit.text)

    # Facets over written documents' fields: the API's counts; a click filters, the chip unfilters.
    docs = "".join(json.dumps({"id": "fx%d" % i, "title": "qvtunnel %d" % i, "body": "qvtunnel " * (1 + i % 5),
                               "kind": ["glider", "rotor", "jet"][i % 3], "year": 1950 + i % 4}) + "\n" for i in range(30))
    status, body, _ = cluster.call("POST", "/indexes/default/documents", docs.encode())
    if status != 200:
        fail("bulk: %d %s" % (status, body[:200]))
    last = max(item["sequence"] for item in json.loads(body)["items"])
    h.wait_until(lambda: len(api(q="qvtunnel", k=100, after=last)["hits"]) == 30, 30, "the written documents searchable")
    search_in_page("qvtunnel")
    wait.until(status_says("Results 1\u201310"))
    everything = api(q="qvtunnel", k=10, facets="*", facet_size=8)

    def shown_facets():
        return {(b.get_attribute("data-field"), b.get_attribute("data-value"), b.find_element(By.CSS_SELECTOR, ".count").text)
                for b in driver.find_elements(By.CSS_SELECTOR, "#facets button")}
    expected_facets = {(f, v["value"], str(v["count"])) for f, facet in everything["facets"].items() for v in facet["values"]}
    if shown_facets() != expected_facets or ("kind", "rotor", "10") not in expected_facets:
        fail("facets shown %s, the API's %s" % (sorted(shown_facets()), sorted(expected_facets)))
    driver.find_element(By.CSS_SELECTOR, '#facets button[data-field="kind"][data-value="rotor"]').click()
    filtered = [x["id"] for x in api(q="qvtunnel", k=10, filter='kind:"rotor"')["hits"]]
    wait.until(lambda d: shown_ids() == filtered)
    if not filtered or driver.find_element(By.ID, "filters").text.strip() != 'kind:"rotor" \u00d7':
        fail("filtered: %s, chips %r" % (filtered, driver.find_element(By.ID, "filters").text))
    driver.find_element(By.CSS_SELECTOR, '#facets button[data-field="year"][data-value="1951"]').click()
    both = [x["id"] for x in api(q="qvtunnel", k=10, filter=['kind:"rotor"', "year=1951"])["hits"]]
    wait.until(lambda d: shown_ids() == both and len(d.find_elements(By.CSS_SELECTOR, "#filters button")) == 2)
    driver.find_element(By.CSS_SELECTOR, "#filters button").click()  # kind:"rotor" removed
    wait.until(lambda d: shown_ids() == [x["id"] for x in api(q="qvtunnel", k=10, filter="year=1951")["hits"]])
    if "filter=year%3D1951" not in driver.current_url:
        fail("the filter is not in the fragment: %s" % driver.current_url)

    # A partition gone: the warning.
    cluster.leaves[1].kill()
    cluster.leaves[1].wait()
    search_in_page("shock wave")
    wait.until(lambda d: d.find_element(By.ID, "partial").is_displayed())
    if "partition 1" not in driver.find_element(By.ID, "partial").text:
        fail("the warning: %r" % driver.find_element(By.ID, "partial").text)

    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE" and "/search" not in e["message"]]
    if errors:
        fail("console errors: %s" % errors)
    print("search_page_test: the page searched, paged, highlighted and warned as the API answers")
finally:
    if driver is not None:
        driver.quit()
    h.cleanup()
