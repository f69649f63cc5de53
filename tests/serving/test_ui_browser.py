"""The web page in a real browser (Debian's Chromium, headless, through Selenium and chromium-driver): on a fresh
store, add notes, ask, see the candidates, post an answer citing [2], see the citation on the chunk's history,
correct a note and see the newer version served with its date, forget a note and find it nowhere; each step
asserted on the page, every submit done from the keyboard, every link and button of a page reached by Tab; a
screenshot of every page kept in tests/artifacts/ui/ (PAI_UI_SCREENSHOTS names another folder).
Skips, saying why, where Chromium, its driver or Selenium is absent (`.ci/install` installs them)."""

import os
import re
import shutil
from pathlib import Path

import pytest

from retrieval.db import connect, store_id
from retrieval.ops import forget_files
from retrieval.params import ForgetParams
from serving.server import BackgroundServer

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="Debian's chromium and chromium-driver are not installed (bash .ci/chromium)"
)
SHOTS = Path(os.environ.get("PAI_UI_SCREENSHOTS", Path(__file__).resolve().parents[1] / "artifacts" / "ui"))
NOTES = {
    "bees": "# Bees\n\nHoney bees store nectar as honey in wax combs inside the hive.",
    "ants": "# Ants\n\nLeafcutter ants farm a fungus on the leaves they carry home to the nest.",
    "wasps": "# Wasps\n\nPaper wasps build their nests from chewed wood fibre and saliva.",
}


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(arg)
    try:
        driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    except WebDriverException as e:
        pytest.skip(f"chromium did not start: {str(e).splitlines()[0]}")
    driver.set_page_load_timeout(120)
    driver.implicitly_wait(20)  # an element looked for is waited for: a submit's page may still be loading
    yield driver
    driver.quit()


def shot(driver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def submit_by_keyboard(driver, field_id: str, text: str | None = None) -> None:
    """Type into a field, then Tab to the form's submit button and press Enter: no mouse."""
    field = driver.find_element(By.ID, field_id)
    field.send_keys(Keys.CONTROL, "a") if text is not None and field.tag_name == "textarea" else None
    if text is not None:
        field.send_keys(text)
    form = field.find_element(By.XPATH, "./ancestor::form")
    button = form.find_element(By.CSS_SELECTOR, "button[type=submit], button")
    for _ in range(10):
        if driver.switch_to.active_element == button:
            break
        driver.switch_to.active_element.send_keys(Keys.TAB)
    assert driver.switch_to.active_element == button, f"Tab never reached the submit button of #{field_id}"
    button.send_keys(Keys.ENTER)


def all_reached_by_tab(driver) -> None:
    """Every link, button and field of the page takes the focus by Tab alone (none is mouse-only)."""
    focusable = driver.find_elements(By.CSS_SELECTOR, "a[href], button, input:not([type=hidden]), select, textarea")
    body = driver.find_element(By.TAG_NAME, "body")
    body.click()
    reached = set()
    for _ in range(len(focusable) + 5):
        body.send_keys(Keys.TAB) if not reached else driver.switch_to.active_element.send_keys(Keys.TAB)
        reached.add(driver.switch_to.active_element.id)
    missing = [e.get_attribute("outerHTML")[:80] for e in focusable if e.is_displayed() and e.id not in reached]
    assert not missing, f"not reached by Tab on {driver.current_url}: {missing}"


def test_the_flow_in_a_browser(first_stage_service, browser, db_url, monkeypatch):
    for name in ("PAI_TOKENS_FILE", "PAI_READ_TOKEN", "PAI_WRITE_TOKEN", "PAI_ADMIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    b = browser
    svc = first_stage_service()
    with BackgroundServer(svc) as srv:
        # 1. notes, added from the memory page
        for source, text in NOTES.items():
            b.get(srv.url + "/ui/memory")
            b.find_element(By.ID, "note-source").send_keys(source)
            submit_by_keyboard(b, "note-text", text)
            assert b.current_url.startswith(srv.url + "/ui/documents/")
            assert text.split("\n\n")[1] in b.find_element(By.TAG_NAME, "main").text
        b.get(srv.url + "/ui/memory")
        assert "3 documents" in b.find_element(By.ID, "total").text
        shot(b, "memory")
        # 2. ask, see the context and every candidate
        b.get(srv.url + "/ui/ask")
        submit_by_keyboard(b, "query", "where do insects keep their food")
        assert "/ui/queries/" in b.current_url
        rows = b.find_elements(By.CSS_SELECTOR, "#candidates tbody tr")
        assert len(rows) == 3 and all("webhook:" in r.text for r in rows)
        assert "first-stage" in b.find_element(By.ID, "selector").text
        assert len(b.find_elements(By.CSS_SELECTOR, "#context li")) >= 1
        query_url = b.current_url
        all_reached_by_tab(b)
        # 3. an answer citing [2]; the citation on the chunk's history
        second = b.find_element(By.ID, "cand-2")
        cited_source = second.find_element(By.CSS_SELECTOR, "a").text
        submit_by_keyboard(b, "answer-text", "They keep it in combs and nests [2].")
        assert "Cited: [2]" in b.find_element(By.ID, "cited").text
        assert "used" in b.find_element(By.ID, "cand-2").text
        shot(b, "query")
        b.find_element(By.ID, "cand-2").find_element(By.CSS_SELECTOR, "a").send_keys(Keys.ENTER)
        history = b.find_element(By.ID, "history").text
        assert "where do insects keep their food" in history and "cited" in history
        shot(b, "chunk")
        # 4. correct the cited note: the newer version served, with its date
        b.find_element(By.CSS_SELECTOR, "dl.facts a").send_keys(Keys.ENTER)
        assert cited_source in b.find_element(By.TAG_NAME, "h1").text
        corrected = f"# {cited_source}\n\nCorrected: they keep their food in the larder of the nest."
        submit_by_keyboard(b, "edit-text", corrected)
        versions = b.find_elements(By.CSS_SELECTOR, "#versions tbody tr")
        assert [v.get_attribute("class") for v in versions] == ["current", "superseded"]
        assert "larder" in versions[0].text and "larder" not in versions[1].text
        written = b.find_element(By.ID, "written").text
        doc_url = b.current_url
        all_reached_by_tab(b)
        shot(b, "document")
        b.get(srv.url + "/ui/ask")
        submit_by_keyboard(b, "query", "the larder of the nest")
        context = b.find_element(By.ID, "context").text
        assert "larder" in context and written in context
        # 5. forget it: nowhere after
        b.get(doc_url)
        forget = b.find_element(By.CSS_SELECTOR, "button.danger")
        forget.send_keys(Keys.ENTER)
        assert "forgotten: " + cited_source in b.find_element(By.ID, "done").text
        assert cited_source not in b.find_element(By.ID, "documents").text
        b.get(srv.url + "/ui/memory?q=larder")
        assert "0 documents" in b.find_element(By.ID, "total").text
        # and nowhere else: no table, staging file or cache holds either version (pai forget --verify's scan)
        with connect(db_url) as conn:
            places = forget_files.places(ForgetParams(), svc.staging.path(), store=store_id(conn))
            original = next(t for name, t in NOTES.items() if name in cited_source).split("\n\n")[1]
            for text in ("Corrected: they keep their food in the larder", original):
                assert forget_files.verify(conn, text, places) == [], text
        b.get(srv.url + "/ui/ask")
        submit_by_keyboard(b, "query", "the larder of the nest")
        assert cited_source not in b.find_element(By.TAG_NAME, "main").text and "Corrected:" not in b.page_source
        b.get(query_url)
        assert "Corrected:" not in b.page_source and "forgotten or changed" in b.page_source
        b.get(doc_url)
        assert "not found" in b.find_element(By.TAG_NAME, "main").text
        # the other pages render, reachable from the keyboard
        for name in ("ask", "loop", "health"):
            b.get(f"{srv.url}/ui/{name}")
            assert b.find_element(By.TAG_NAME, "h1").text
            all_reached_by_tab(b)
            shot(b, name)
        assert re.search(r"webhook:\w+", b.find_element(By.ID, "size").text) is None  # counts, no names
        b.get(srv.url + "/ui/login")
        shot(b, "login")
