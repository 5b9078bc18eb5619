"""The cluster page in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by Selenium): it loads, lists the live brokers, and after a broker process is killed shows
it offline and the partitions the controller left under-replicated. A screenshot of that is kept
under the test's directory, and in $PARTCTL_TEST_ARTIFACTS when set.

The cluster is three ``partctl broker start`` processes on a real ZooKeeper (sessions of 6 s, so
that the kill is noticed quickly); the page is served by partctl's own server on a free loopback
port, reading the same coordinator.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import coordinator
from coordinator.admin import Admin
from coordinator.base import Coordinator
from partctl.cluster_view import read_cluster
from partctl.webui import ClusterPage, serve
from tests.broker.data.test_cluster_clients import SETTINGS, Trio, serving
from tests.broker.processes import coordinator_url
from tests.servers import Server, unavailable
from tests.waiting import wait_until

pytestmark = pytest.mark.servers

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = "PARTCTL_TEST_ARTIFACTS"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
        unavailable(f"{CHROMIUM} and {CHROMEDRIVER} are needed (Debian's chromium and "
                    f"chromium-driver; .ci/setup installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1400", f"--user-data-dir={tmp_path / 'profile'}",
                "--no-first-run", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps"):
        options.add_argument(arg)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "driver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


class PageTrio(Trio):
    """Three broker processes whose coordinator sessions last 6 s."""

    def settings(self) -> str:
        return SETTINGS + "zookeeper.session.timeout.ms=6000\n"


def test_the_page_shows_the_live_brokers_and_then_the_under_replicated_partitions(
        browser, zookeeper_server: Server, tmp_path: Path) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By

    server = None
    with serving(PageTrio(coordinator_url(zookeeper_server), tmp_path, {}),
                 only_running=True) as trio:
        client = coordinator.connect(trio.url, timeout=10)
        try:
            admin = Admin(client)
            admin.create_topic("t", assignment={0: [1, 2], 1: [2, 3], 2: [3, 1]},
                               config={"min.insync.replicas": "2"})
            wait_until(lambda: (lambda v: len(v.partitions) == 3 and v.under_replicated == 0
                                and v.offline == 0)(read_cluster(client)),
                       timeout=60, message="t's three partitions led with full ISRs")
            server = serve(ClusterPage(client, cache_seconds=0), "127.0.0.1", 0)
            url = f"http://127.0.0.1:{server.server_address[1]}/"
            _page_checks(browser, By, url, trio, client, tmp_path)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
            client.close()


def _page_checks(browser, By, url: str, trio: PageTrio, client: Coordinator,  # noqa: ANN001, N803
                 tmp_path: Path) -> None:
    browser.get(url)
    assert browser.title == "partctl cluster"
    rows = browser.find_elements(By.CSS_SELECTOR, "#brokers tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[3].text for r in rows] == ["yes"] * 3
    assert browser.find_element(By.ID, "under-replicated").text == "Under-replicated: 0"

    trio.brokers[3].kill()  # SIGKILL: the controller learns it when its session ends
    wait_until(lambda: read_cluster(client).under_replicated == 2, timeout=60,
               message="t-1 and t-2 under-replicated without broker 3")
    browser.get(url)
    assert browser.find_element(By.ID, "under-replicated").text == "Under-replicated: 2"
    assert browser.find_element(By.ID, "summary").text.startswith(
        "Controller: broker ")
    live = browser.find_element(By.ID, "broker-3").find_elements(By.TAG_NAME, "td")[3]
    assert live.text == "no (offline)"
    troubled = browser.find_element(By.ID, "p-t-2").text
    assert "under-replicated" in troubled and "under min ISR" in troubled
    picture = browser.find_element(By.CSS_SELECTOR, "img[src='/plot/current.png']")
    assert browser.execute_script("return arguments[0].naturalWidth", picture) > 0

    shot = tmp_path / "cluster-page.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes().startswith(b"\x89PNG")
    if os.environ.get(ARTIFACTS):
        os.makedirs(os.environ[ARTIFACTS], exist_ok=True)
        shutil.copy(shot, Path(os.environ[ARTIFACTS]) / "cluster-page.png")

    browser.get(url + "topic?name=t")
    assert "3,1" in browser.find_element(By.ID, "p-t-2").text
