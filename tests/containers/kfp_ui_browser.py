"""A person at the Kubeflow Pipelines UI: Debian's Chromium, headless, driven through its
ChromeDriver by Selenium (which downloads nothing: both paths are given). Every step waits for
what a person would wait to see, and each page worth showing is saved as a screenshot.

    ui = Browser(address, shots_dir)
    ui.go("/pipelines"); ui.click_text("Upload pipeline"); ui.shot("upload")
    ui.quit()
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable, Dict, List

#: A page's slowest answer on the bed (MLMD's lineage of a run, through its gRPC-Web proxy).
WAIT_S = 60.0
WINDOW = (1440, 960)


def _xpath_literal(text: str) -> str:
    """`text` as an XPath string literal (XPath 1.0 has no escapes)."""
    if "'" not in text:
        return f"'{text}'"
    return "concat(" + ", \"'\", ".join(f"'{part}'" for part in text.split("'")) + ")"


class Browser:
    """A headless Chromium at the UI's ADDRESS, saving screenshots into SHOTS."""

    def __init__(self, address: str, shots: Path):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
        assert chromium and driver, ("Chromium and ChromeDriver are missing: the test set-up "
                                     "installs them (.ci/system-packages.sh: chromium, "
                                     "chromium-driver)")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                         "--disable-gpu", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(driver), options=options)
        self.address = address.rstrip("/")
        self.shots = Path(shots)
        self.shots.mkdir(parents=True, exist_ok=True)

    def quit(self) -> None:
        """Closes the browser and ends ChromeDriver and Chromium's processes."""
        self.driver.quit()

    def go(self, route: str) -> None:
        """Opens the UI's page at ROUTE (`/pipelines`, `/runs/details/ID`), loaded afresh."""
        url = f"{self.address}/#{route}"
        if self.driver.current_url == url:  # the same page: only a reload reads it again
            self.driver.refresh()
        else:
            self.driver.get(url)

    def wait(self, found: Callable[[], object], what: str, seconds: float = WAIT_S):
        """What `found()` returns once it is truthy (a Selenium lookup that fails counts as not
        yet), or fails naming WHAT, with the page's text, after SECONDS."""
        from selenium.common.exceptions import WebDriverException

        deadline = time.monotonic() + seconds
        while True:
            try:
                result = found()
            except WebDriverException:
                result = None
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"the UI did not show {what} within {seconds:.0f} s; the "
                                     f"page read:\n{self.text()[-3000:]}")
            time.sleep(0.5)

    def text(self) -> str:
        """The page's visible text."""
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.TAG_NAME, "body").text

    def elements(self, css: str) -> List:
        from selenium.webdriver.common.by import By

        return [e for e in self.driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]

    def element(self, css: str, seconds: float = WAIT_S):
        """The first visible element CSS selects, once there is one."""
        return self.wait(lambda: next(iter(self.elements(css)), None), f"'{css}'", seconds)

    def with_text(self, text: str, tag: str = "*", seconds: float = WAIT_S):
        """The innermost visible TAG element whose text contains TEXT, once there is one."""
        from selenium.webdriver.common.by import By

        literal = _xpath_literal(text)
        xpath = (f"//{tag}[contains(normalize-space(.), {literal}) and not(.//{tag}"
                 f"[contains(normalize-space(.), {literal})])]")

        def visible():
            return next((e for e in self.driver.find_elements(By.XPATH, xpath)
                         if e.is_displayed()), None)

        return self.wait(visible, repr(text), seconds)

    def file_input(self):
        """The page's file chooser (hidden behind its button, as file inputs are)."""
        from selenium.webdriver.common.by import By

        return self.wait(lambda: self.driver.find_element(By.CSS_SELECTOR, "input[type=file]"),
                         "a file chooser")

    def click_text(self, text: str, tag: str = "*", seconds: float = WAIT_S) -> None:
        self.with_text(text, tag, seconds).click()

    def click(self, css: str, seconds: float = WAIT_S) -> None:
        self.element(css, seconds).click()

    def type_into(self, css: str, value: str, clear: bool = True) -> None:
        """Types VALUE into the field CSS selects, as a person would (the UI's forms react to
        key presses, not to a value set from outside)."""
        from selenium.webdriver.common.keys import Keys

        field = self.element(css)
        if clear:
            field.send_keys(Keys.CONTROL, "a")
            field.send_keys(Keys.DELETE)
        field.send_keys(value)

    def shot(self, name: str, element=None) -> Path:
        """Saves the page (or one ELEMENT of it) as SHOTS/NAME.png."""
        path = self.shots / f"{name}.png"
        if element is None:
            self.driver.save_screenshot(str(path))
        else:
            path.write_bytes(element.screenshot_as_png)
        return path

    def close_panel(self) -> None:
        """Closes the side panel a node of a run's graph opened (its X), if one is open."""
        from selenium.webdriver.common.by import By

        for button in self.elements("button"):
            if button.find_elements(By.CSS_SELECTOR, "svg[data-testid='CloseIcon']"):
                button.click()
                self.wait(lambda: not any(b.find_elements(
                    By.CSS_SELECTOR, "svg[data-testid='CloseIcon']")
                    for b in self.elements("button")), "the side panel closed", 10)
                return

    def scroll_to(self, element) -> None:
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", element)

    def frame_text(self, frame) -> str:
        """The text inside an iframe (an HTML artifact the UI's viewer shows)."""
        from selenium.webdriver.common.by import By

        self.driver.switch_to.frame(frame)
        try:
            return self.driver.find_element(By.TAG_NAME, "body").text
        finally:
            self.driver.switch_to.default_content()

    def frame_images(self, frame, heading: str) -> Dict[str, List[int]]:
        """Each image inside an iframe by its alt text: its own width (0: not drawn, as a blocked
        or broken image is) and the width it is shown at; the frame scrolled to its HEADING (an
        h2)."""
        self.driver.switch_to.frame(frame)
        try:
            return self.driver.execute_script(
                "const h = [...document.querySelectorAll('h2')]"
                "  .find(e => e.textContent === arguments[0]);"
                "if (h) h.scrollIntoView();"
                "return Object.fromEntries([...document.images]"
                "  .map(i => [i.alt, [i.complete ? i.naturalWidth : 0, i.width]]));", heading)
        finally:
            self.driver.switch_to.default_content()
